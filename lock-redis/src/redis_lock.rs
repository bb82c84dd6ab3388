//! `RedisLock`: the [`Lock`] backend on one Redis server.

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use lock_core::{
    Attempt, Handover, Kind, Lease, Lock, LockError, Op, ReleaseWatch, TimeoutPhase, Token,
    check_ttl, valid_until,
};
use redis::{ErrorKind, FromRedisValue, ServerErrorKind};
use tokio::time::Instant;

use crate::config::{RedisLockBuilder, Settings};
use crate::conn::{Conn, Connections, Source};
use crate::error::{BACKEND, breaks_connection, from_redis, timeout};
use crate::holder::Describe;
use crate::layout::{announces, fence_key, holder_key, release_channel, token_value, turn_channel};
use crate::replication::Replication;
use crate::scripts::{
    ACQUIRE, EXTEND, FAIR_RELEASE, HANDOVER, Lua, RELEASE, RW_RELEASE, SEMAPHORE_RELEASE,
};
#[cfg(feature = "cluster")]
use crate::scripts::{
    FAIR_RELEASE_SHARDED, RELEASE_SHARDED, RW_RELEASE_SHARDED, SEMAPHORE_RELEASE_SHARDED,
};
use crate::subscriber::Subscriber;

/// A distributed lock on Redis (≥ 7.0) — one server, a Redis Cluster (feature `cluster`) or a
/// master found through Sentinel (feature `sentinel`) — through a `deadpool-redis` pool.
///
/// Layout: the lock named `n` is the string key `prefix + n` holding the owner's token as a
/// plain string (`dl:` + 32 hex characters, see [`TOKEN_PREFIX`](crate::TOKEN_PREFIX)) with a
/// millisecond expiry — the layout of redis-py's `Lock`, node-redlock and redsync, so services
/// in those languages using the same name exclude each other. Beside it, in
/// the same cluster slot, sit the fencing counter and the release channel (see
/// [`RedisLock::fence_key`]).
///
/// Fencing tokens are `max(server time in µs, last token + 1)`, computed in the acquire script.
/// They strictly increase per name across release, expiry, and a restart without persistence
/// (the clock carries them over what the counter does not survive), as long as the server's
/// clock is not stepped back across a restart.
///
/// Each operation is one EVALSHA round trip over a shared multiplexed connection; every command
/// is bounded by the command timeout and connecting by the connect timeout, so a Redis that is
/// down or hangs yields a typed error in bounded time.
pub struct RedisLock {
    conns: Connections,
    /// Release announcements for waiters; `None` when built from a pool without a URL.
    subscriber: Option<Subscriber>,
    prefix: String,
    command_timeout: Duration,
    pub(crate) fence_retention_ms: u64,
    /// Whether grants carry fencing tokens (the acquire script) or not (a plain `SET NX`).
    pub(crate) fencing: bool,
    /// What each grant writes about its holder, when built with holder metadata.
    holder: Option<Describe>,
    /// The release scripts of the mutex, the read-write lock and the semaphore: announcing with
    /// `PUBLISH`, or `SPUBLISH` (sharded) on a cluster.
    pub(crate) release: &'static Lua,
    pub(crate) rw_release: &'static Lua,
    pub(crate) semaphore_release: &'static Lua,
    pub(crate) fair_release: &'static Lua,
    /// Replicas that must confirm each grant and renewal, if any.
    replication: Option<Replication>,
}

impl RedisLock {
    /// Starts configuring a lock; see [`RedisLockBuilder`].
    pub fn builder() -> RedisLockBuilder {
        RedisLockBuilder::default()
    }

    /// A lock on the Redis at `url`, with default settings. Connects on first use.
    ///
    /// # Errors
    /// [`LockError::InvalidInput`] when the URL does not parse.
    pub fn from_url(url: &str) -> Result<Self, LockError> {
        Self::builder().url(url).build()
    }

    /// A lock over an existing pool of one Redis server, with default settings. Waiters poll
    /// with backoff, since a pool cannot open the separate pub/sub connection release
    /// announcements need; give the builder a [`pubsub_url`](RedisLockBuilder::pubsub_url) to
    /// have them.
    #[must_use]
    pub fn from_pool(pool: deadpool_redis::Pool) -> Self {
        Self::assemble(Source::Single(pool), Settings::default())
    }

    pub(crate) fn assemble(source: Source, settings: Settings) -> Self {
        let pubsub_limit = settings.connect_timeout + settings.command_timeout;
        #[cfg(feature = "cluster")]
        let sharded = matches!(source, Source::Cluster(_));
        #[cfg(not(feature = "cluster"))]
        let sharded = false;
        let [release, rw_release, semaphore_release, fair_release] = release_scripts(sharded);
        Self {
            conns: Connections::new(source, settings.connect_timeout),
            subscriber: settings
                .pubsub
                .map(|origin| Subscriber::new(origin, pubsub_limit)),
            prefix: settings.prefix,
            command_timeout: settings.command_timeout,
            fence_retention_ms: ms(settings.fence_retention),
            fencing: settings.fencing,
            holder: settings.holder,
            release,
            rw_release,
            semaphore_release,
            fair_release,
            replication: settings.replication,
        }
    }

    /// How long one command may wait for its reply (see
    /// [`RedisLockBuilder::command_timeout`]).
    #[must_use]
    pub fn command_timeout(&self) -> Duration {
        self.command_timeout
    }

    /// Which kind of deployment this lock talks to: `"single"`, `"cluster"` or `"sentinel"`.
    #[must_use]
    pub fn topology(&self) -> &'static str {
        match self.conns.source() {
            Source::Single(_) => "single",
            #[cfg(feature = "cluster")]
            Source::Cluster(_) => "cluster",
            #[cfg(feature = "sentinel")]
            Source::Sentinel(_) => "sentinel",
        }
    }

    /// The Redis key of the lock `name`: the prefix followed by the name.
    #[must_use]
    pub fn key(&self, name: &str) -> String {
        let mut key = String::with_capacity(self.prefix.len() + name.len());
        key.push_str(&self.prefix);
        key.push_str(name);
        key
    }

    /// The key of the fencing counter of the lock `name`, in the same cluster slot as
    /// [`RedisLock::key`]: `{key}:distlock-fence` when the key has no hash tag, `key:distlock-fence`
    /// when it has one.
    #[must_use]
    pub fn fence_key(&self, name: &str) -> String {
        fence_key(&self.key(name))
    }

    /// The channel every release of `name` is announced on (an empty message), in the same
    /// cluster slot as its key; waiters subscribe to it through [`Lock::watch`].
    #[must_use]
    pub fn release_channel(&self, name: &str) -> String {
        release_channel(&self.key(name))
    }

    /// Runs one script (EVALSHA, loading it on NOSCRIPT) with a bounded wait for its reply,
    /// replacing the connection if the failure shows it broken. `keys[0]` is the lock key.
    /// Returns the connection it used, for a `WAIT` on the same one.
    pub(crate) async fn run<T: FromRedisValue>(
        &self,
        op: Op,
        script: &Lua,
        keys: &[&str],
        args: &[&str],
    ) -> Result<(T, Conn), LockError> {
        // EVALSHA written straight into one command buffer: redis-rs's `ScriptInvocation`
        // would first copy every key and argument into a vector of its own (an allocation
        // each, on every lock operation).
        let size = keys.iter().chain(args).map(|a| a.len()).sum::<usize>() + 64;
        let mut call = redis::Cmd::with_capacity(3 + keys.len() + args.len(), size);
        call.arg("EVALSHA")
            .arg(script.sha1())
            .arg(keys.len())
            .arg(keys)
            .arg(args);
        let mut conn = self.conns.get().await?;
        let started = Instant::now();
        let first = tokio::time::timeout(self.command_timeout, async {
            match call.query_async(&mut conn.conn).await {
                Err(err) if err.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                    // Flushed, or a restarted or failed-over server: load it, call again once.
                    redis::cmd("SCRIPT")
                        .arg("LOAD")
                        .arg(script.source())
                        .exec_async(&mut conn.conn)
                        .await?;
                    call.query_async(&mut conn.conn).await
                }
                answer => answer,
            }
        })
        .await;
        self.settle(first, conn, op, keys[0], started)
    }

    /// Sends one plain command, bounded by the command timeout like [`Self::run`].
    async fn send<T: FromRedisValue>(
        &self,
        op: Op,
        cmd: &redis::Cmd,
        key: &str,
    ) -> Result<(T, Conn), LockError> {
        let mut conn = self.conns.get().await?;
        let started = Instant::now();
        let reply =
            tokio::time::timeout(self.command_timeout, cmd.query_async(&mut conn.conn)).await;
        self.settle(reply, conn, op, key, started)
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
                Err(from_redis(err, op, key, started.elapsed()))
            }
            Err(_) => {
                // The reply may still come; the connection is in an unknown state.
                self.conns.discard(&conn);
                Err(timeout(TimeoutPhase::Command, started.elapsed()))
            }
        }
    }

    /// Marks that a distlock waiter waits for the lock at `key`, for `holder_ttl` and a second
    /// more, so that the holder's release announces itself (`lua/release.lua` announces only
    /// when it deletes such a mark). The fenced acquire script marks by itself; this is for the
    /// busy answers that come from elsewhere (a plain `SET NX`, the multi-lock script).
    ///
    /// Best effort: a mark that fails to land leaves the waiter polling (its retries are
    /// bounded by the holder's TTL and the backoff), so the failure is logged, not returned.
    pub(crate) async fn mark_waiting(&self, key: &str, holder_ttl: Duration) {
        let mark = release_channel(key);
        let mut set = redis::Cmd::with_capacity(5, mark.len() + 32);
        set.arg("SET")
            .arg(&mark)
            .arg("1")
            .arg("PX")
            .arg(ms(holder_ttl).saturating_add(1000));
        if let Err(error) = self.send::<()>(Op::Acquire, &set, key).await {
            tracing::debug!(%error, "marking a waiter failed; its release may go unannounced");
        }
    }

    /// Waits for replicas to confirm the grant of `lease`, if this lock asks for it; a grant
    /// they do not confirm is released rather than held where a failover would lose it.
    pub(crate) async fn confirm_grant(
        &self,
        conn: &mut Conn,
        key: &str,
        lease: &Lease,
    ) -> Result<(), LockError> {
        let Err(error) = self.confirm(conn, key, Op::Acquire).await else {
            return Ok(());
        };
        if let Err(release_error) = Lock::release(self, lease).await {
            tracing::warn!(%release_error, "releasing an unconfirmed grant failed; it expires at the end of its TTL");
        }
        Err(error)
    }

    /// Waits for replicas to confirm a write made on `conn`, if this lock asks for it.
    pub(crate) async fn confirm(
        &self,
        conn: &mut Conn,
        key: &str,
        op: Op,
    ) -> Result<(), LockError> {
        match &self.replication {
            Some(replication) => {
                replication
                    .confirm(&mut conn.conn, key, self.command_timeout, op)
                    .await
            }
            None => Ok(()),
        }
    }
}

/// The release scripts of the mutex, the read-write lock, the semaphore and the fair lock:
/// announcing with `SPUBLISH` on a cluster (`sharded`), `PUBLISH` elsewhere.
fn release_scripts(sharded: bool) -> [&'static Lua; 4] {
    #[cfg(feature = "cluster")]
    if sharded {
        return [
            &RELEASE_SHARDED,
            &RW_RELEASE_SHARDED,
            &SEMAPHORE_RELEASE_SHARDED,
            &FAIR_RELEASE_SHARDED,
        ];
    }
    let _ = sharded;
    [&RELEASE, &RW_RELEASE, &SEMAPHORE_RELEASE, &FAIR_RELEASE]
}

/// What an acquire attempt's reply said, fenced or not.
enum Grant {
    /// Ours, with this fencing token (0 without fencing).
    Granted(u64),
    /// Held by another, for this long if the reply said; `announces` when that holder is a
    /// distlock holder, which announces its release.
    Busy {
        holder_ttl: Option<Duration>,
        announces: bool,
    },
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[async_trait]
impl Lock for RedisLock {
    fn backend(&self) -> &'static str {
        BACKEND
    }

    /// Every kind. The multi-lock in one script on a single server or a Sentinel-watched
    /// primary; on a Cluster one name after the other, because names in different slots cannot
    /// share a script. Fencing tokens `max(clock in µs, counter + 1)` per name, strict; none
    /// (0) with [`fencing(false)`](RedisLockBuilder::fencing), the user's opt-out. Releases
    /// announced when the lock has a pub/sub connection (built with a URL, or a pool plus
    /// [`pubsub_url`](RedisLockBuilder::pubsub_url)).
    fn capabilities(&self) -> lock_core::backend::Capabilities {
        use lock_core::backend::{Capabilities, Fencing, MultiLock, TokenScale};
        let multi = if self.topology() == "cluster" {
            MultiLock::InOrder
        } else {
            MultiLock::Atomic
        };
        let fencing = if self.fencing {
            Fencing::Strict(TokenScale::Clock)
        } else {
            Fencing::None
        };
        Capabilities::MUTEX
            .with_read_write()
            .with_semaphore()
            .with_fair()
            .with_multi(multi)
            .with_fencing(fencing)
            .with_announcements(self.subscriber.is_some())
    }

    async fn try_acquire(
        &self,
        name: &str,
        token: Token,
        ttl: Duration,
    ) -> Result<Attempt, LockError> {
        let ttl_ms = check_ttl(ttl)?;
        let key = self.checked_key(name)?;
        let started = Instant::now();
        let value = token_value(&token);
        let (reply, mut conn) = if self.fencing {
            let fence = fence_key(&key);
            let (ttl_arg, retention_arg) =
                (ttl_ms.to_string(), self.fence_retention_ms.to_string());
            let described = self.holder.as_ref().map(|h| h.of(value.as_str()));
            let mut args = vec![value.as_str(), &ttl_arg, &retention_arg];
            args.extend(described.as_deref());
            let (answer, conn) = self
                .run::<Vec<i64>>(Op::Acquire, &ACQUIRE, &[&key, &fence], &args)
                .await?;
            let reply = match answer[..] {
                [1, fence] => Grant::Granted(u64::try_from(fence).unwrap_or(0)),
                // PTTL: -1 when the key has no expiry (not a lock we know), else ms left.
                [_, pttl, announces] => Grant::Busy {
                    holder_ttl: u64::try_from(pttl).ok().map(Duration::from_millis),
                    announces: announces == 1,
                },
                _ => {
                    return Err(LockError::Backend {
                        backend: BACKEND,
                        op: Op::Acquire,
                        retryable: false,
                        source: format!("unexpected acquire reply {answer:?}").into(),
                    });
                }
            };
            (reply, conn)
        } else {
            // Without fencing the script has nothing to add to one `SET NX`: a plain command
            // saves the server the script call (~10,000 instructions and ~1,500 per argument).
            let mut set = redis::Cmd::with_capacity(7, key.len() + 64);
            set.arg("SET")
                .arg(&key)
                .arg(value.as_str())
                .arg("NX")
                .arg("PX")
                .arg(ttl_ms)
                .arg("GET");
            let (holder, conn) = self
                .send::<Option<Vec<u8>>>(Op::Acquire, &set, &key)
                .await?;
            // nil: ours, with no fencing token. A holder's token: busy, for how long unknown.
            let reply = match holder {
                None => Grant::Granted(0),
                Some(holder) => {
                    let announces = announces(&holder);
                    if announces {
                        // The holder's TTL is unknown here; a waiter polls within this request's
                        // TTL, and marks again on each busy answer.
                        self.mark_waiting(&key, Duration::from_millis(ttl_ms)).await;
                    }
                    Grant::Busy {
                        holder_ttl: None,
                        announces,
                    }
                }
            };
            (reply, conn)
        };
        match reply {
            Grant::Granted(fencing_token) => {
                let valid = valid_until(started, Duration::from_millis(ttl_ms));
                let lease = Lease::new(name, token, fencing_token, valid);
                self.confirm_grant(&mut conn, &key, &lease).await?;
                Ok(Attempt::Acquired(lease))
            }
            Grant::Busy {
                holder_ttl,
                announces,
            } => Ok(Attempt::Busy {
                holder_ttl,
                announces,
            }),
        }
    }

    /// Read shares, write locks and permits through their own scripts (see the crate README,
    /// "Read-write locks and semaphores").
    async fn try_acquire_kind(
        &self,
        name: &str,
        kind: Kind,
        token: Token,
        ttl: Duration,
    ) -> Result<Attempt, LockError> {
        match kind {
            Kind::Mutex => self.try_acquire(name, token, ttl).await,
            kind => self.try_kind(name, kind, token, ttl).await,
        }
    }

    async fn permits_in_use(&self, name: &str) -> Result<u32, LockError> {
        self.permits_used(name).await
    }

    /// One script for every name when they share a server (or a cluster slot); else one
    /// after the other ([`lock_core::acquire_in_order`]).
    async fn try_acquire_all(
        &self,
        names: &[std::sync::Arc<str>],
        token: Token,
        ttl: Duration,
    ) -> Result<lock_core::MultiAttempt, LockError> {
        self.try_all(names, token, ttl).await
    }

    async fn extend(&self, lease: &Lease, ttl: Duration) -> Result<Option<Instant>, LockError> {
        // A fair lease is the mutex's key: the same compare-and-pexpire.
        if !matches!(lease.kind(), Kind::Mutex | Kind::Fair { .. }) {
            return self.extend_kind(lease, ttl).await;
        }
        let ttl_ms = check_ttl(ttl)?;
        let key = self.key(lease.name());
        let started = Instant::now();
        let (value, ttl_arg) = (token_value(lease.token()), ttl_ms.to_string());
        let holder = self.holder.as_ref().map(|_| holder_key(&key));
        let mut args = vec![value.as_str(), &ttl_arg];
        args.extend(holder.as_deref());
        let (extended, mut conn): (i64, Conn) =
            self.run(Op::Extend, &EXTEND, &[&key], &args).await?;
        if extended != 1 {
            return Ok(None);
        }
        self.confirm(&mut conn, &key, Op::Extend).await?;
        Ok(Some(valid_until(started, Duration::from_millis(ttl_ms))))
    }

    /// One EVALSHA of `lua/handover.lua`: compare the token, store the next holder's with
    /// `ttl`, issue a fencing token (unless built with `fencing(false)`).
    async fn hand_over(
        &self,
        lease: &Lease,
        to: Token,
        ttl: Duration,
    ) -> Result<Handover, LockError> {
        if lease.kind() != Kind::Mutex {
            return Ok(Handover::Unsupported);
        }
        let ttl_ms = check_ttl(ttl)?;
        let key = self.key(lease.name());
        let started = Instant::now();
        let (from, to_value) = (token_value(lease.token()), token_value(&to));
        let (ttl_arg, retention_arg) = (ttl_ms.to_string(), self.fence_retention_ms.to_string());
        let fence = if self.fencing {
            fence_key(&key)
        } else {
            String::new()
        };
        let described = self.holder.as_ref().map(|h| h.of(to_value.as_str()));
        let (keys, args): (&[&str], Vec<&str>) = if self.fencing {
            let mut args = vec![from.as_str(), to_value.as_str(), &ttl_arg, &retention_arg];
            args.extend(described.as_deref());
            (&[&key, &fence], args)
        } else {
            (&[&key], vec![from.as_str(), to_value.as_str(), &ttl_arg])
        };
        let ((handed, fencing_token), mut conn): ((i64, i64), Conn) =
            self.run(Op::Acquire, &HANDOVER, keys, &args).await?;
        if handed != 1 {
            return Ok(Handover::NotOwned);
        }
        let fencing_token = u64::try_from(fencing_token).unwrap_or(0);
        let valid = valid_until(started, Duration::from_millis(ttl_ms));
        let next = Lease::new(lease.name(), to, fencing_token, valid);
        self.confirm_grant(&mut conn, &key, &next).await?;
        Ok(Handover::Handed(next))
    }

    async fn release(&self, lease: &Lease) -> Result<bool, LockError> {
        if lease.kind() != Kind::Mutex {
            // Read shares, writers, permits, and fair leases (which tell the queue's head).
            return self.release_kind(lease).await;
        }
        let key = self.key(lease.name());
        let value = token_value(lease.token());
        let channel = release_channel(&key);
        let holder = self.holder.as_ref().map(|_| holder_key(&key));
        let mut args = vec![value.as_str(), &channel];
        args.extend(holder.as_deref());
        let (released, _): (i64, Conn) =
            self.run(Op::Release, self.release, &[&key], &args).await?;
        Ok(released == 1)
    }

    /// Connects if there is no connection, then sends one `PING`, both bounded by their
    /// timeouts.
    async fn ping(&self) -> Result<(), LockError> {
        let ping = redis::cmd("PING");
        self.send::<()>(Op::Connect, &ping, "").await.map(drop)
    }

    /// Subscribes to the fair waiter's own turn channel (`{key}:distlock-turn:` + its token), on
    /// which a fair holder's release (or the withdrawal of the waiter ahead) tells the head of
    /// the queue alone.
    async fn watch_turn(
        &self,
        name: &str,
        token: &Token,
    ) -> Result<Option<ReleaseWatch>, LockError> {
        match &self.subscriber {
            Some(subscriber) => {
                let channel = turn_channel(&self.key(name), token_value(token).as_str());
                subscriber.watch(channel).await.map(Some)
            }
            None => Ok(None),
        }
    }

    /// Subscribes to the lock's release channel on the lock's shared pub/sub connection (one
    /// per `RedisLock` and runtime, serving every name); `None` when the lock was built from a
    /// pool without a pub/sub URL.
    async fn watch(&self, name: &str) -> Result<Option<ReleaseWatch>, LockError> {
        match &self.subscriber {
            Some(subscriber) => subscriber.watch(self.release_channel(name)).await.map(Some),
            None => Ok(None),
        }
    }
}

impl fmt::Debug for RedisLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisLock")
            .field("prefix", &self.prefix)
            .field("command_timeout", &self.command_timeout)
            .field("fence_retention_ms", &self.fence_retention_ms)
            .field("fencing", &self.fencing)
            .field("topology", &self.topology())
            .finish_non_exhaustive()
    }
}
#[cfg(test)]
mod future_sizes {
    use super::*;

    /// Every lock operation's future holds these; the backend's boxed future is allocated and
    /// filled on every call, so a large one costs each call a copy and a slow allocation. They
    /// were ~7 KB while connecting was inline (see `Connections::get`).
    #[test]
    fn command_futures_stay_small() {
        const LIMIT: usize = 2048;
        let lock = RedisLock::from_url("redis://127.0.0.1:1/").expect("url");
        let run = lock.run::<i64>(Op::Release, &RELEASE, &["k"], &["a", "b"]);
        assert!(size_of_val(&run) < LIMIT, "run: {}", size_of_val(&run));
        let get = redis::cmd("GET");
        let send = lock.send::<i64>(Op::Acquire, &get, "k");
        assert!(size_of_val(&send) < LIMIT, "send: {}", size_of_val(&send));
        let mark = lock.mark_waiting("k", Duration::from_secs(1));
        assert!(size_of_val(&mark) < LIMIT, "mark: {}", size_of_val(&mark));
    }
}
