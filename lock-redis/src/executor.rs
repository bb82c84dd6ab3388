//! The executor: how every operation of every kind reaches Redis. One command or script per
//! call, bounded by the command timeout; a failure that leaves the connection unusable replaces
//! it; replicas confirm a write when the lock asks for it. The kinds (`kinds/`) decide which
//! script runs on which keys; this module only runs it.

use std::time::Duration;

use lock_core::{LockError, Op, TimeoutPhase};
use redis::{ErrorKind, FromRedisValue, ServerErrorKind};
use tokio::time::Instant;

use crate::connection::conn::{Conn, Connections};
use crate::connection::replication::Replication;
use crate::error::{breaks_connection, from_redis, timeout};
use crate::layout::Keys;
use crate::scripts::Lua;
use crate::scripts::native::{self, Command, Native, is_refusal};
use crate::topology::Topology;
use crate::units::ms;

/// Runs commands and scripts for one `RedisLock`: its connections, its command timeout and the
/// replicas that must confirm its writes.
pub(crate) struct Executor {
    conns: Connections,
    command_timeout: Duration,
    /// Replicas that must confirm each grant and renewal, if any.
    replication: Option<Replication>,
    /// Which native commands may replace scripts (see `native.rs`).
    native: Native,
}

impl Executor {
    pub(crate) fn new(
        conns: Connections,
        command_timeout: Duration,
        replication: Option<Replication>,
    ) -> Self {
        Self {
            conns,
            command_timeout,
            replication,
            native: Native::new(true),
        }
    }

    /// Whether releases and extensions try the server's own compare-and-delete and
    /// compare-and-set before a script (default: yes; see `native.rs`).
    pub(crate) fn with_native_commands(mut self, on: bool) -> Self {
        self.native = Native::new(on);
        self
    }

    /// How long one command may wait for its reply.
    pub(crate) fn command_timeout(&self) -> Duration {
        self.command_timeout
    }

    /// When a command sent at `started` has waited too long: `started` plus the command
    /// timeout. (`timeout_at` with the instant the caller read anyway, where `timeout` would
    /// read the clock again: each reading shows under S2's profile.) A timeout too long for the
    /// clock waits 30 years, as tokio's own `timeout` does.
    fn deadline(&self, started: Instant) -> Instant {
        const FAR: Duration = Duration::from_secs(30 * 365 * 24 * 3600);
        started
            .checked_add(self.command_timeout)
            .or_else(|| started.checked_add(FAR))
            .unwrap_or(started)
    }

    /// The shared connection, connecting first if there is none (for the fences' library
    /// loading, which routes its own commands).
    ///
    /// # Errors
    /// As `Connections::get`.
    pub(crate) async fn connection(&self) -> Result<Conn, LockError> {
        self.conns.get().await
    }

    /// Which kind of deployment the commands go to.
    /// The server's label in logs and metrics (`host:port`, `sentinel:<master>`, `pool`).
    pub(crate) fn server(&self) -> &str {
        self.conns.grace().server()
    }

    pub(crate) fn topology(&self) -> Topology {
        self.conns.topology()
    }

    /// Runs one script (EVALSHA, loading it on NOSCRIPT) with a bounded wait for its reply,
    /// replacing the connection if the failure shows it broken. `keys[0]` is the lock key;
    /// `args` are text (`&str`) or any bytes (`&[u8]`, a holder's note). Returns the connection
    /// it used, for a `WAIT` on the same one.
    pub(crate) async fn run<T: FromRedisValue, A: AsRef<[u8]> + redis::ToRedisArgs + Sync>(
        &self,
        op: Op,
        script: &Lua,
        keys: &[&str],
        args: &[A],
    ) -> Result<(T, Conn), LockError> {
        let arg_bytes = args.iter().map(|a| a.as_ref().len()).sum();
        let mut call = evalsha(script, keys, args.len(), arg_bytes);
        call.arg(args);
        self.eval(op, script, &call, keys[0]).await
    }

    /// Sends the EVALSHA `call` of `script`, loading the script and calling again once on
    /// NOSCRIPT, bounded by the command timeout; `key` is the lock key (for errors and WAIT).
    pub(crate) async fn eval<T: FromRedisValue>(
        &self,
        op: Op,
        script: &Lua,
        call: &redis::Cmd,
        key: &str,
    ) -> Result<(T, Conn), LockError> {
        let mut conn = self.conns.get().await?;
        let started = Instant::now();
        let first = tokio::time::timeout_at(self.deadline(started), async {
            match call.query_async(&mut conn.conn).await {
                Err(err) if err.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                    // Flushed, or a restarted or failed-over server: load it, call again once.
                    // Boxed: rare, and inline it would double the future every lock operation
                    // allocates (past the allocator's per-thread cache for small blocks).
                    Box::pin(load_and_call(&mut conn.conn, script, call)).await
                }
                answer => answer,
            }
        })
        .await;
        self.settle(first, conn, op, key, started)
    }

    /// Sends one plain command, bounded by the command timeout like [`Self::run`].
    pub(crate) async fn send<T: FromRedisValue>(
        &self,
        op: Op,
        cmd: &redis::Cmd,
        key: &str,
    ) -> Result<(T, Conn), LockError> {
        let mut conn = self.conns.get().await?;
        let started = Instant::now();
        let reply =
            tokio::time::timeout_at(self.deadline(started), cmd.query_async(&mut conn.conn)).await;
        self.settle(reply, conn, op, key, started)
    }

    /// Sends `pipe` (plain reads, no script) to `node`, a master of a Redis Cluster given by
    /// address, or to the one server (`None`), bounded by the command timeout: the operator
    /// reads of `inspect/`, which walk every master.
    ///
    /// # Errors
    /// [`LockError::Timeout`] past the command timeout; [`LockError::Backend`] when Redis
    /// fails (a read that fails inside the pipeline is a reply, not an error).
    pub(crate) async fn read_pipeline(
        &self,
        pipe: &redis::Pipeline,
        node: Option<&(String, u16)>,
    ) -> Result<Vec<redis::Value>, LockError> {
        let mut conn = self.conns.get().await?;
        let started = Instant::now();
        let reply = tokio::time::timeout_at(self.deadline(started), async {
            match (&mut conn.conn, node) {
                #[cfg(feature = "cluster")]
                (crate::connection::conn::Handle::Cluster(cluster), Some((host, port))) => {
                    let count = pipe.len();
                    cluster
                        .route_pipeline(
                            pipe.clone(),
                            0,
                            count,
                            redis::cluster_routing::SingleNodeRoutingInfo::ByAddress {
                                host: host.clone(),
                                port: *port,
                            },
                        )
                        .await
                }
                (handle, _) => pipe.query_async(handle).await,
            }
        })
        .await;
        self.settle(reply, conn, Op::Read, "", started)
            .map(|(values, _)| values)
    }

    /// Whether a grant of a lease of `ttl` on `keys` may be made now (see `grace.rs`):
    /// `Ok(None)` yes, `Ok(Some(left))` not for `left`, the server's grace period; a `ttl`
    /// above the grace is logged once. No I/O, and no lock taken outside a grace period.
    /// A restart or a failover shows on the next *new* connection, which learns the server's
    /// facts before it carries any command; so asked again after a grant, this also covers a
    /// grant made on a connection that was new.
    ///
    /// On a Redis Cluster the answer is the grace of the masters that own the slots of `keys`,
    /// and the node facts are refreshed first when they are due (see `cluster_grace.rs`): a
    /// failure since the last refresh, or a refresh older than
    /// [`CLUSTER_GRACE_REFRESH`](crate::CLUSTER_GRACE_REFRESH).
    ///
    /// # Errors
    /// Strict mode and a server that may evict lock keys (see
    /// [`EvictionRisk`](crate::EvictionRisk)).
    ///
    /// # Cancel safety
    /// Cancel safe: dropped mid-refresh, the node facts stay as they were.
    pub(crate) async fn grace_left(
        &self,
        ttl: Duration,
        keys: &[&str],
    ) -> Result<Option<Duration>, LockError> {
        let grace = self.conns.grace();
        grace.check_lease(ttl);
        if grace.inert() {
            return Ok(None);
        }
        #[cfg(feature = "cluster")]
        if let Some(cluster) = self.conns.cluster_grace() {
            if cluster.needs_refresh() {
                // Boxed, as connecting is (`Connections::get`): the refresh is rare, and
                // inline it would grow every acquire's future.
                Box::pin(async {
                    if let Ok(Conn {
                        conn: crate::connection::conn::Handle::Cluster(mut conn),
                        ..
                    }) = self.conns.get().await
                    {
                        cluster.refresh(&mut conn).await;
                    }
                })
                .await;
            }
            return cluster.verdict(keys);
        }
        let _ = keys;
        grace.verdict()
    }

    /// Whether a native `command` is worth building before [`Self::native`] is asked: native
    /// commands are on, this is not a Cluster, and the newest connection has not refused it.
    /// A hint without I/O, so that a server known to lack the command (Redis 7) costs a release
    /// or an extension no pipeline built for nothing (~3,500 client instructions per release,
    /// `scripts/client-cost.sh`); [`Self::native`] still decides on the connection it sends on.
    pub(crate) fn may_go_native(&self, command: Command) -> bool {
        if self.topology() == Topology::Cluster {
            return false;
        }
        match self.conns.newest_generation() {
            0 => self.native.usable(command, u64::MAX),
            newest => self.native.usable(command, newest),
        }
    }

    /// Sends `pipe`, native commands on the slot of `key` whose first is `command`, bounded by
    /// the command timeout like [`Self::run`], and answers each command's reply (an error reply
    /// as [`Value::ServerError`](redis::Value::ServerError): the pipeline must ignore errors).
    /// `Ok(None)` when the connection refused `command`, now or before, or on a Redis Cluster:
    /// nothing was done, and the caller runs its script instead.
    ///
    /// A Cluster keeps the scripts: while a slot migrates, the waiting mark may already be on
    /// the other node, and a pipeline whose second command is redirected (`ASK`) fails as a
    /// whole after its first (the lock's `DELIFEQ`) ran, leaving the release's outcome unknown;
    /// the release script touches the mark with `pcall` instead (`lua/release.lua`).
    pub(crate) async fn native(
        &self,
        command: Command,
        op: Op,
        pipe: &redis::Pipeline,
        key: &str,
    ) -> Result<Option<(Vec<redis::Value>, Conn)>, LockError> {
        if self.topology() == Topology::Cluster {
            return Ok(None);
        }
        let mut conn = self.conns.get().await?;
        let generation = conn.generation();
        if !self.native.usable(command, generation) {
            return Ok(None);
        }
        if self.native.must_ask(command, generation) {
            let started = Instant::now();
            let answer = tokio::time::timeout(
                self.command_timeout,
                native::ask(command).query_async::<redis::Value>(&mut conn.conn),
            )
            .await;
            match answer {
                Ok(Ok(answer)) if native::has_command(&answer) => {
                    self.native.known(command, generation);
                }
                // Unknown there, or an error reply (the ACL denies `COMMAND`: NOPERM): the
                // script, on this connection.
                Ok(Ok(_)) => {
                    self.native.refused(command, generation);
                    return Ok(None);
                }
                Ok(Err(err)) if !breaks_connection(&err) => {
                    self.native.refused(command, generation);
                    return Ok(None);
                }
                broken => {
                    let reply = broken.map(|r| r.map(|_| ()));
                    self.settle(reply, conn, op, key, started)?;
                    return Ok(None);
                }
            }
        }
        let started = Instant::now();
        let reply = tokio::time::timeout(
            self.command_timeout,
            pipe.query_async::<Vec<redis::Value>>(&mut conn.conn),
        )
        .await;
        let (replies, conn) = self.settle(reply, conn, op, key, started)?;
        if replies.first().is_none_or(is_refusal) {
            tracing::debug!(
                ?command,
                "the server refused a native command; using the script"
            );
            self.native.refused(command, generation);
            return Ok(None);
        }
        Ok(Some((replies, conn)))
    }

    /// Connects if there is no connection, then sends one `PING`, both bounded by their
    /// timeouts.
    pub(crate) async fn ping(&self) -> Result<(), LockError> {
        let ping = redis::cmd("PING");
        self.send::<()>(Op::Connect, &ping, "").await.map(drop)
    }

    /// Maps a bounded reply, replacing the connection when the failure leaves it unusable.
    fn settle<T>(
        &self,
        reply: Result<redis::RedisResult<T>, tokio::time::error::Elapsed>,
        conn: Conn,
        op: Op,
        key: &str,
        started: Instant,
    ) -> Result<(T, Conn), LockError> {
        match reply {
            Ok(Ok(value)) => Ok((value, conn)),
            Ok(Err(err)) => {
                if breaks_connection(&err) {
                    self.conns.discard(&conn);
                }
                #[cfg(feature = "cluster")]
                if let Some(cluster) = self.conns.cluster_grace() {
                    cluster.saw_error(&err);
                }
                Err(from_redis(err, op, key, started.elapsed()))
            }
            Err(_) => {
                #[cfg(feature = "cluster")]
                if let Some(cluster) = self.conns.cluster_grace() {
                    cluster.saw_timeout();
                }
                // The reply may still come; the connection is in an unknown state.
                self.conns.discard(&conn);
                Err(timeout(TimeoutPhase::Command, started.elapsed()))
            }
        }
    }

    /// Marks that a distlock waiter waits for the lock at `keys`, held by the token `holder`,
    /// for `holder_ttl` and a second more, so that the holder's release announces itself
    /// (`lua/release.lua` announces only when it deletes such a mark; the native release only
    /// when the mark holds its own token). The fenced acquire script marks by itself; this is
    /// for the busy answers that come from elsewhere (a plain `SET NX`, the multi-lock script).
    ///
    /// Best effort: a mark that fails to land leaves the waiter polling (its retries are
    /// bounded by the holder's TTL and the backoff), so the failure is logged, not returned.
    pub(crate) async fn mark_waiting(&self, keys: &Keys, holder_ttl: Duration, holder: &[u8]) {
        let mark = keys.released();
        let mut set = redis::Cmd::with_capacity(5, mark.len() + holder.len() + 32);
        set.arg("SET")
            .arg(&mark)
            .arg(holder)
            .arg("PX")
            .arg(ms(holder_ttl).saturating_add(1000));
        if let Err(error) = self.send::<()>(Op::Acquire, &set, keys.key()).await {
            tracing::debug!(%error, "marking a waiter failed; its release may go unannounced");
        }
    }

    /// Waits for replicas to confirm a write made on `conn`, if this lock asks for it.
    pub(crate) async fn confirm(
        &self,
        conn: &mut Conn,
        key: &str,
        op: Op,
    ) -> Result<(), LockError> {
        match &self.replication {
            // Boxed: only a lock that asks replicas pays for it, with a round trip anyway;
            // inline it would grow the future of every acquire and extension.
            Some(replication) => {
                Box::pin(replication.confirm(&mut conn.conn, key, self.command_timeout, op)).await
            }
            None => Ok(()),
        }
    }
}

/// The start of an EVALSHA of `script` on `keys`, sized for `args` arguments of `arg_bytes`
/// bytes in all, which the caller adds with `.arg(..)`. Written straight into one command
/// buffer: redis-rs's `ScriptInvocation` would first copy every key and argument into a vector
/// of its own (an allocation each, on every lock operation).
pub(crate) fn evalsha(script: &Lua, keys: &[&str], args: usize, arg_bytes: usize) -> redis::Cmd {
    let size = keys.iter().map(|k| k.len()).sum::<usize>() + arg_bytes + 64;
    let mut call = redis::Cmd::with_capacity(3 + keys.len() + args, size);
    call.arg("EVALSHA")
        .arg(script.sha1())
        .arg(keys.len())
        .arg(keys);
    call
}

/// Loads `script` and sends its EVALSHA `call` again, after a NOSCRIPT answer.
async fn load_and_call<T: FromRedisValue>(
    conn: &mut crate::connection::conn::Handle,
    script: &Lua,
    call: &redis::Cmd,
) -> redis::RedisResult<T> {
    redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(script.source())
        .exec_async(conn)
        .await?;
    call.query_async(conn).await
}

#[cfg(test)]
mod future_sizes {
    use super::*;
    use crate::connection::conn::Source;
    use crate::scripts::RELEASE;

    /// Every lock operation's future holds these; the backend's boxed future is allocated and
    /// filled on every call, so a large one costs each call a copy and a slow allocation. They
    /// were ~7 KB while connecting was inline (see `Connections::get`).
    #[test]
    fn command_futures_stay_small() {
        const LIMIT: usize = 2048;
        let pool = deadpool_redis::Config::from_url("redis://127.0.0.1:1/")
            .create_pool(Some(deadpool_redis::Runtime::Tokio1))
            .expect("pool");
        let exec = Executor::new(
            Connections::new(
                Source::Single(pool),
                Duration::from_secs(1),
                crate::safety::grace::GraceState::new(
                    crate::safety::grace::GraceSettings {
                        grace: Duration::ZERO,
                        strict: false,
                    },
                    "test".into(),
                    "",
                ),
            ),
            Duration::from_secs(1),
            None,
        );
        let run = exec.run::<i64, &str>(Op::Release, &RELEASE, &["k"], &["a", "b"]);
        assert!(size_of_val(&run) < LIMIT, "run: {}", size_of_val(&run));
        let get = redis::cmd("GET");
        let send = exec.send::<i64>(Op::Acquire, &get, "k");
        assert!(size_of_val(&send) < LIMIT, "send: {}", size_of_val(&send));
        let keys = Keys::from_key("k");
        let mark = exec.mark_waiting(&keys, Duration::from_secs(1), b"dl:0");
        assert!(size_of_val(&mark) < LIMIT, "mark: {}", size_of_val(&mark));
    }

    /// The futures `RedisLock` boxes on every acquire and release (async_trait) are served by
    /// glibc's per-thread cache only up to 1,032-byte blocks: a larger one takes the slow path of
    /// `malloc` on every call, and was a visible share of the client's time under load (`perf`
    /// over S2: `_int_malloc`). The rare paths (loading a flushed script, asking a new connection
    /// about `DELIFEQ`, announcing a native release) are boxed apart for this.
    #[test]
    fn the_boxed_lock_futures_fit_the_allocators_cache() {
        use lock_core::backend::Lock;
        use lock_core::{Lease, Token};
        const CACHED: usize = 1016;
        let lock = crate::RedisLock::builder()
            .url("redis://127.0.0.1:1/")
            .build()
            .expect("a lock");
        let token = Token::from_bytes([1; 16]);
        let acquire = lock.try_acquire("k", token, Duration::from_secs(1));
        let lease = Lease::new("k", token, 0, Instant::now());
        let release = lock.release(&lease);
        assert!(
            size_of_val(&*acquire) <= CACHED,
            "try_acquire: {}",
            size_of_val(&*acquire)
        );
        assert!(
            size_of_val(&*release) <= CACHED,
            "release: {}",
            size_of_val(&*release)
        );
    }
}
