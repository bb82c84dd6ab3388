//! Building a [`RedisLock`]: its constructors, its builder, and the assembly of its parts.
//! The lock's own file never names its configuration, so the two import one way.

use std::time::Duration;

use deadpool_redis::{Manager, Pool, Runtime};
use lock_core::LockError;

use crate::conn::{Connections, Source};
use crate::executor::Executor;
use crate::grace::{DEFAULT_GRACE, GraceSettings, Watch};
use crate::kinds::Grants;
use crate::redis_lock::RedisLock;
use crate::replication::{ReplicaPolicy, Replication};
use crate::subscriber::{Origin, Ping, Subscriber};
use crate::units::ms;

/// How long getting a connection may take, connecting included, by default: 2 s.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// How long one command may wait for its reply by default: 1 s.
pub const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(1);

/// How often the release subscriber sends `PING` on its subscribed connection by default: 5 s.
/// See [`RedisLockBuilder::subscriber_ping_interval`].
pub const DEFAULT_SUBSCRIBER_PING_INTERVAL: Duration = Duration::from_secs(5);

/// How long a name's fencing counter is kept after its last grant by default: 24 h.
pub const DEFAULT_FENCE_RETENTION: Duration = Duration::from_secs(24 * 3600);

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
        assemble(Source::Single(pool), Settings::default())
    }
}

/// Configures a [`RedisLock`]: where Redis is (a URL or your own `deadpool_redis::Pool`), the key
/// prefix, timeouts and the fencing counter's retention.
///
/// ```
/// use std::time::Duration;
/// use lock_redis::RedisLock;
///
/// let lock = RedisLock::builder()
///     .url("redis://127.0.0.1:6379/0")
///     .prefix("myapp:locks:")
///     .command_timeout(Duration::from_millis(500))
///     .build()?;
/// # Ok::<(), lock_redis::LockError>(())
/// ```
#[derive(Default)]
#[must_use]
pub struct RedisLockBuilder {
    url: Option<String>,
    pool: Option<Pool>,
    #[cfg(feature = "cluster")]
    cluster_urls: Option<Vec<String>>,
    #[cfg(feature = "cluster")]
    cluster_pool: Option<deadpool_redis::cluster::Pool>,
    #[cfg(feature = "sentinel")]
    sentinel: Option<(Vec<String>, String)>,
    replication: Option<Replication>,
    pubsub_url: Option<String>,
    #[cfg(feature = "tls")]
    tls: crate::tls::TlsSettings,
    announcements: Option<bool>,
    prefix: String,
    connect_timeout: Option<Duration>,
    command_timeout: Option<Duration>,
    fence_retention: Option<Duration>,
    fencing: Option<bool>,
    holder_metadata: bool,
    holder_note: Option<String>,
    grace: Option<Duration>,
    strict: bool,
    native_commands: Option<bool>,
    subscriber_ping: Option<Duration>,
}

impl RedisLockBuilder {
    /// Connect with a `redis://` (or `unix://`) URL; credentials and database go in the URL
    /// (`redis://user:password@host:port/db`). A pool of up to 4 connections is made, of which
    /// the lock keeps one in use (see the crate docs). With the `tls` feature, `rediss://`
    /// connects over TLS (see [`tls_ca_cert`](RedisLockBuilder::tls_ca_cert)).
    pub fn url(mut self, url: impl Into<String>) -> Self {
        self.url = Some(url.into());
        self
    }

    /// Use an existing pool instead of a URL. Release announcements then need
    /// [`pubsub_url`](RedisLockBuilder::pubsub_url).
    pub fn pool(mut self, pool: Pool) -> Self {
        self.pool = Some(pool);
        self
    }

    /// Lock on a Redis Cluster reached through these node URLs (some or all of its nodes; the
    /// client discovers the rest). All keys of one lock share a hash slot, so each operation
    /// is one script on the node that owns it; MOVED and ASK redirections and NOSCRIPT on a
    /// node the script never reached are handled by the client. Release announcements use
    /// sharded pub/sub (`SPUBLISH`/`SSUBSCRIBE`), answered by the slot's own node.
    #[cfg(feature = "cluster")]
    pub fn cluster_urls<S: Into<String>>(mut self, urls: impl IntoIterator<Item = S>) -> Self {
        self.cluster_urls = Some(urls.into_iter().map(Into::into).collect());
        self
    }

    /// Lock on a Redis Cluster through an existing cluster pool. Release announcements then
    /// need the nodes' URLs: give them with [`cluster_urls`](RedisLockBuilder::cluster_urls) too
    /// (used only by the subscriber).
    #[cfg(feature = "cluster")]
    pub fn cluster_pool(mut self, pool: deadpool_redis::cluster::Pool) -> Self {
        self.cluster_pool = Some(pool);
        self
    }

    /// Lock on the master that these sentinels name for `master_name`. After a failover the
    /// next operation that finds the old master gone or read-only connects to the new one.
    #[cfg(feature = "sentinel")]
    pub fn sentinel<S: Into<String>>(
        mut self,
        sentinel_urls: impl IntoIterator<Item = S>,
        master_name: impl Into<String>,
    ) -> Self {
        self.sentinel = Some((
            sentinel_urls.into_iter().map(Into::into).collect(),
            master_name.into(),
        ));
        self
    }

    /// After every grant and renewal, wait up to `timeout` until `replicas` replicas have the
    /// write (`WAIT`), and apply `policy` when fewer confirm. This narrows the window in which a
    /// master crash loses a granted lock to a failover; it is not consensus (see
    /// [`ReplicaPolicy`] and the crate docs) — pair it with fencing tokens. Each grant and
    /// renewal then takes one more round trip, as long as the replicas need.
    pub fn wait_for_replicas(
        mut self,
        replicas: u32,
        timeout: Duration,
        policy: ReplicaPolicy,
    ) -> Self {
        self.replication = Some(Replication {
            replicas,
            timeout,
            policy,
        });
        self
    }

    /// Where the pub/sub connection for release announcements connects (default: the
    /// [`url`](RedisLockBuilder::url)); needed with a [`pool`](RedisLockBuilder::pool).
    pub fn pubsub_url(mut self, url: impl Into<String>) -> Self {
        self.pubsub_url = Some(url.into());
        self
    }

    /// Over TLS (`rediss://` URLs), trust only this CA certificate (PEM; a bundle of several
    /// is fine) instead of the operating system's trust store: the usual setup for a Redis
    /// whose certificate a private CA signed. Applies to the [`url`](RedisLockBuilder::url)
    /// and the [`pubsub_url`](RedisLockBuilder::pubsub_url); a [`pool`](RedisLockBuilder::pool)
    /// you built brings its own TLS settings.
    ///
    /// ```no_run
    /// use lock_redis::RedisLock;
    ///
    /// let ca = std::fs::read("/etc/redis/tls/ca.crt").expect("CA certificate");
    /// let lock = RedisLock::builder()
    ///     .url("rediss://locker:secret@redis.internal:6380/0")
    ///     .tls_ca_cert(ca)
    ///     .build()?;
    /// # Ok::<(), lock_redis::LockError>(())
    /// ```
    #[cfg(feature = "tls")]
    pub fn tls_ca_cert(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.tls.ca_cert_pem = Some(pem.into());
        self
    }

    /// Over TLS, present this client certificate and its private key (both PEM) to servers
    /// that demand one (`tls-auth-clients yes`): mutual TLS.
    #[cfg(feature = "tls")]
    pub fn tls_client_cert(
        mut self,
        cert_pem: impl Into<Vec<u8>>,
        key_pem: impl Into<Vec<u8>>,
    ) -> Self {
        self.tls.client_cert = Some((cert_pem.into(), key_pem.into()));
        self
    }

    /// Whether waiters subscribe to release announcements (default: yes, when a URL is known).
    /// Without them waiters poll with backoff: more commands and a slower handoff, but one
    /// connection fewer.
    pub fn announcements(mut self, on: bool) -> Self {
        self.announcements = Some(on);
        self
    }

    /// Put every key under `prefix`: the lock named `n` lives at `prefix + n` (default: no
    /// prefix, so `n` itself, as redis-py and node-redlock name it).
    ///
    /// **Interop:** the prefix is part of the key, so a lock taken by another client (redis-py,
    /// node-redlock) on the bare name `n` no longer excludes a distlock lock on `n` with a
    /// prefix: both sides must use the same full key.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// How long getting a connection may take, connecting and authenticating included (default
    /// [`DEFAULT_CONNECT_TIMEOUT`]).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = Some(timeout);
        self
    }

    /// How long one command may wait for its reply (default [`DEFAULT_COMMAND_TIMEOUT`]).
    /// Past it the operation fails with a `Command` timeout and the connection is replaced.
    pub fn command_timeout(mut self, timeout: Duration) -> Self {
        self.command_timeout = Some(timeout);
        self
    }

    /// How often the release subscriber checks that its connection is alive (default
    /// [`DEFAULT_SUBSCRIBER_PING_INTERVAL`], 5 s; `Duration::ZERO` turns the check off).
    ///
    /// A pub/sub connection only reads, so a link that died without a close (a NAT or
    /// firewall entry dropped, a peer machine gone: no FIN, no RST) would hide every release
    /// announcement until the OS gives up on it, which can take minutes or hours
    /// (wolph/portalocker#146). So the subscriber sends `PING` on it at this interval; when no
    /// answer comes within the [`command_timeout`](RedisLockBuilder::command_timeout), it
    /// reconnects, subscribes every watched name again and wakes every waiter to look again
    /// (a release may have been missed meanwhile). A dead link is thus noticed within about
    /// interval + command timeout (6 s by default); the cost is one `PING` per interval per
    /// `RedisLock` and tokio runtime that waits. A waiter never depends on it alone: it also
    /// retries when the holder's TTL runs out. Not applied on a Redis Cluster, whose
    /// subscriptions ride redis-rs's cluster connection.
    pub fn subscriber_ping_interval(mut self, interval: Duration) -> Self {
        self.subscriber_ping = Some(interval);
        self
    }

    /// How long a name's fencing counter is kept after its last grant (default
    /// [`DEFAULT_FENCE_RETENTION`]). While it is kept, fencing tokens increase even if the
    /// server's clock steps back; after, they rest on the clock alone. Each kept counter costs
    /// one small key.
    pub fn fence_retention(mut self, retention: Duration) -> Self {
        self.fence_retention = Some(retention);
        self
    }

    /// Whether grants carry fencing tokens (default: yes).
    ///
    /// Off, a grant is one plain `SET key token NX PX ttl GET` instead of the acquire script,
    /// no fencing counter is kept, and every lease's
    /// [`fencing_token`](lock_core::Lease::fencing_token) is 0. An acquire + release cycle then
    /// costs the server about 40 % of the work of a fenced one (36,000 against 91,000
    /// instructions; see `benches/README.md`), which is what a hand-written `SET NX PX` lock
    /// costs. A busy answer then carries no holder TTL, so a waiter that misses a release
    /// announcement finds an expired holder by backoff (at most 100 ms late) instead of at the
    /// expiry itself.
    ///
    /// Turn it off only when nothing downstream checks tokens: fencing is what keeps a holder
    /// that was paused past its lease (a GC pause, a stalled VM) from overwriting the work of
    /// the next holder (Kleppmann, "How to do distributed locking", 2016). A resource that
    /// demands strictly increasing tokens rejects every write after the first at token 0.
    pub fn fencing(mut self, on: bool) -> Self {
        self.fencing = Some(on);
        self
    }

    /// Whether each grant describes its holder (default: no): host, process id, the grant's
    /// time (this client's wall clock, Unix ms) and the [`holder_note`](Self::holder_note),
    /// as JSON under `{key}:distlock-holder` beside the lock key — in its cluster slot,
    /// written by the acquire script itself (no extra round trip), expiring, renewed, handed
    /// over and deleted with the lease. `distlock ls` and `distlock show` print it. The lock
    /// key's value stays the plain token, so redis-py and node-redlock interop is unchanged.
    /// Mutex grants only (the read-write lock, the semaphore and the fair lock write none), and
    /// only with fencing on (the description is written by the fenced acquire script).
    ///
    /// Its cost, per uncontended acquire + release cycle: one `SET` in the acquire script and
    /// one `DEL` in the release script, and the description's bytes (see the crate README).
    pub fn holder_metadata(mut self, on: bool) -> Self {
        self.holder_metadata = on;
        self
    }

    /// A free-form string every holder's description carries (a job name, a deploy id); turns
    /// [`holder_metadata`](Self::holder_metadata) on.
    pub fn holder_note(mut self, note: impl Into<String>) -> Self {
        self.holder_note = Some(note.into());
        self.holder_metadata = true;
        self
    }

    /// How long a Redis that may have lost grants grants nothing (default [`DEFAULT_GRACE`],
    /// the `Locker`'s default lease of 30 s; zero turns it off): the *store grace period*.
    ///
    /// **The rule:** the grace must be at least the longest lease or `fixed_ttl` that any
    /// client of this Redis uses, renewed or not. A holder whose key the server lost keeps
    /// working until its lease's `valid_until`, at most one lease after its last grant or
    /// renewal; a grace that long, counted from when this process saw the server change, ends
    /// after every such lease has.
    ///
    /// By default a process refuses grants for the grace period when it *saw* the server
    /// change: a new `run_id` on a new connection (a restart), or a replica that became master
    /// (role and replication id). The first connection of a process compares with nothing, so a
    /// fresh Redis grants at once. With [`strict`](Self::strict) a process that never saw the
    /// old server is covered too. While in grace an acquire answers busy with the time left as
    /// the holder's TTL (a `Locker` waits and retries then; `try_acquire` answers
    /// `LockError::Busy`), and [`METRIC_GRACE_REFUSED_TOTAL`](crate::METRIC_GRACE_REFUSED_TOTAL)
    /// counts it. A holder's renewal on a server that lost its key still fails as lost, and
    /// fencing tokens still grow.
    ///
    /// Zero is the opt-out for fleets whose Redis keeps every write (AOF with `appendfsync
    /// always`) and fails over only to replicas that have every grant.
    pub fn grace(mut self, grace: Duration) -> Self {
        self.grace = Some(grace);
        self
    }

    /// Strict data-loss checks (default: off). On every new connection the lock also reads the
    /// server's uptime and persistence (`INFO`, `CONFIG GET appendfsync`) and the marker that
    /// a client which saw a restart or a promotion leaves in the data set
    /// (`prefix + "{distlock}:grace"`), so that a process that never saw the old server also
    /// respects the [`grace`](Self::grace) period; and it refuses to grant at all on a server
    /// whose memory policy can evict lock keys ([`EvictionRisk`](crate::EvictionRisk)).
    ///
    /// **The cost:** a Redis that does not fsync every write to an AOF and started less than the
    /// grace period ago grants nothing until it has run that long — also a brand-new one.
    pub fn strict(mut self, on: bool) -> Self {
        self.strict = on;
        self
    }

    /// Whether releases and extensions use the server's own compare-and-delete and
    /// compare-and-set where it has them (default: yes): `DELIFEQ` (Valkey ≥ 9.0) instead of
    /// the release script, `SET … IFEQ … PX` (Valkey ≥ 8.1) instead of the extend script —
    /// plain commands, cheaper for the server than a script call. Only for mutex (and fair)
    /// leases without [`holder_metadata`](Self::holder_metadata), whose description must be
    /// deleted and extended with the lock, and not on a Redis Cluster (see the crate README,
    /// "Native commands on Valkey"); fenced grants stay a script either way.
    ///
    /// A server without them (Redis 7.x answers `ERR unknown command` or `ERR syntax error`),
    /// or an ACL user denied them (`NOPERM`), gets the script: each connection learns that on
    /// its first refusal, which costs that one call one extra round trip. Turn it off to send
    /// scripts only (to compare the two, or to keep the ACL log free of those refusals).
    pub fn native_commands(mut self, on: bool) -> Self {
        self.native_commands = Some(on);
        self
    }

    /// The lock. Makes no connection yet: the first operation connects.
    ///
    /// # Errors
    /// [`LockError::InvalidInput`] when neither or both of a URL and a pool were given, the URL
    /// does not parse (a `rediss://` one without the `tls` feature), a timeout or the
    /// retention is zero or out of range, or TLS settings were given for a non-`rediss://`
    /// URL, for a cluster or sentinels, or hold no valid certificate; holder metadata with
    /// fencing off.
    pub fn build(self) -> Result<RedisLock, LockError> {
        let fencing = self.fencing.unwrap_or(true);
        if self.holder_metadata && !fencing {
            return Err(LockError::invalid(
                "holder metadata is written by the fenced acquire script: it needs fencing on",
            ));
        }
        let holder = self
            .holder_metadata
            .then(|| crate::holder::Describe::here(self.holder_note.as_deref()));
        let connect_timeout = positive(
            "connect timeout",
            self.connect_timeout.unwrap_or(DEFAULT_CONNECT_TIMEOUT),
        )?;
        let command_timeout = positive(
            "command timeout",
            self.command_timeout.unwrap_or(DEFAULT_COMMAND_TIMEOUT),
        )?;
        let fence_retention = self.fence_retention.unwrap_or(DEFAULT_FENCE_RETENTION);
        lock_core::check_ttl(fence_retention).map_err(|_| {
            LockError::invalid(format!(
                "the fence retention {fence_retention:?} is out of range"
            ))
        })?;
        let announcements = self.announcements.unwrap_or(true);
        let grace = self.grace.unwrap_or(DEFAULT_GRACE);
        if grace > lock_core::MAX_TTL {
            return Err(LockError::invalid(format!(
                "the grace period {grace:?} is above the maximum TTL"
            )));
        }
        let grace = GraceSettings {
            grace,
            strict: self.strict,
        };
        let mut server = String::from("pool");
        #[cfg(feature = "tls")]
        crate::tls::ensure_crypto_provider(); // also for a `pool` of yours over rediss://
        #[cfg(feature = "tls")]
        let tls = &self.tls;
        #[cfg(not(feature = "tls"))]
        let tls = &NoTls;
        let pubsub_client = |url: &str| {
            redis::Client::open(tls.connection_info(url)?)
                .map(Origin::Client)
                .map_err(|e| LockError::invalid(format!("bad pub/sub URL: {e}")))
        };
        let mut chosen = Vec::new();
        let mut pubsub = None;
        if let Some(url) = &self.url {
            let target = tls.connection_info(url)?;
            server = target.addr().to_string();
            chosen.push(Source::Single(pool_from(target, connect_timeout)?));
            pubsub = Some(pubsub_client(self.pubsub_url.as_deref().unwrap_or(url))?);
        }
        if let Some(pool) = self.pool {
            chosen.push(Source::Single(pool));
            pubsub = self.pubsub_url.as_deref().map(pubsub_client).transpose()?;
        }
        #[cfg(feature = "cluster")]
        match (self.cluster_pool, self.cluster_urls) {
            (Some(pool), urls) => {
                chosen.push(Source::Cluster(pool));
                pubsub = urls.map(Origin::Cluster);
            }
            (None, Some(urls)) => {
                chosen.push(Source::Cluster(cluster_pool(
                    &urls,
                    connect_timeout,
                    command_timeout,
                )?));
                pubsub = Some(Origin::Cluster(urls));
            }
            (None, None) => {}
        }
        #[cfg(feature = "sentinel")]
        if let Some((urls, master)) = self.sentinel {
            server = format!("sentinel:{master}");
            chosen.push(Source::Sentinel(sentinel_pool(
                &urls,
                &master,
                connect_timeout,
                command_timeout,
            )?));
            let client = redis::sentinel::SentinelClient::build(
                urls,
                master,
                None,
                redis::sentinel::SentinelServerType::Master,
            )
            .map_err(|e| LockError::invalid(format!("bad sentinel URLs: {e}")))?;
            pubsub = Some(Origin::Sentinel(client));
        }
        #[cfg(feature = "tls")]
        if !self.tls.is_empty() && self.url.is_none() && self.pubsub_url.is_none() {
            // Cluster and sentinel clients take their TLS settings elsewhere; silently
            // ignoring a CA would connect with the system trust store instead.
            return Err(LockError::invalid(
                "TLS certificates apply to a url or pubsub_url; cluster and sentinel \
                 connections verify rediss:// against the system trust store",
            ));
        }
        if chosen.len() != 1 {
            return Err(LockError::invalid(if chosen.is_empty() {
                "a RedisLock needs a URL, a pool, cluster URLs or sentinels"
            } else {
                "give a RedisLock one of: a URL, a pool, a cluster, sentinels"
            }));
        }
        let source = chosen.remove(0);
        Ok(assemble(
            source,
            Settings {
                prefix: self.prefix,
                connect_timeout,
                command_timeout,
                fence_retention,
                fencing,
                holder,
                pubsub: pubsub.filter(|_| announcements),
                replication: self.replication,
                grace,
                server,
                native_commands: self.native_commands.unwrap_or(true),
                subscriber_ping: self
                    .subscriber_ping
                    .unwrap_or(DEFAULT_SUBSCRIBER_PING_INTERVAL),
            },
        ))
    }
}

impl std::fmt::Debug for RedisLockBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisLockBuilder")
            .field("url", &self.url)
            .field("prefix", &self.prefix)
            .field("connect_timeout", &self.connect_timeout)
            .field("command_timeout", &self.command_timeout)
            .finish_non_exhaustive()
    }
}

/// What a `RedisLock` is assembled from, past its pool.
struct Settings {
    prefix: String,
    connect_timeout: Duration,
    command_timeout: Duration,
    fence_retention: Duration,
    /// Whether grants carry fencing tokens.
    fencing: bool,
    /// What grants say about their holder, if they describe it.
    holder: Option<crate::holder::Describe>,
    /// Where the release subscriber connects, if announcements are on.
    pubsub: Option<Origin>,
    /// Replicas that must confirm each grant and renewal.
    replication: Option<Replication>,
    /// The store grace period.
    grace: GraceSettings,
    /// The server's label in logs and metrics.
    server: String,
    /// Whether releases and extensions try native commands first.
    native_commands: bool,
    /// The subscriber's `PING` interval; zero: off.
    subscriber_ping: Duration,
}

/// The lock over connections from `source`, with `settings`.
fn assemble(source: Source, settings: Settings) -> RedisLock {
    let pubsub_limit = settings.connect_timeout + settings.command_timeout;
    let ping = (!settings.subscriber_ping.is_zero()).then_some(Ping {
        interval: settings.subscriber_ping,
        timeout: settings.command_timeout,
    });
    let conns = Connections::new(
        source,
        settings.connect_timeout,
        Watch::new(settings.grace, settings.server, &settings.prefix),
    );
    #[cfg(feature = "cluster")]
    let conns =
        conns.with_cluster_grace(settings.grace, &settings.prefix, settings.command_timeout);
    let exec = Executor::new(conns, settings.command_timeout, settings.replication)
        .with_native_commands(settings.native_commands);
    let grants = Grants::new(
        settings.fencing,
        ms(settings.fence_retention),
        settings.holder,
        exec.topology(),
    );
    let subscriber = settings
        .pubsub
        .map(|origin| Subscriber::new(origin, pubsub_limit, ping));
    RedisLock::new(exec, grants, subscriber, settings.prefix)
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            prefix: String::new(),
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            command_timeout: DEFAULT_COMMAND_TIMEOUT,
            fence_retention: DEFAULT_FENCE_RETENTION,
            fencing: true,
            holder: None,
            pubsub: None,
            replication: None,
            grace: GraceSettings {
                grace: DEFAULT_GRACE,
                strict: false,
            },
            server: String::from("pool"),
            native_commands: true,
            subscriber_ping: DEFAULT_SUBSCRIBER_PING_INTERVAL,
        }
    }
}

fn positive(what: &str, d: Duration) -> Result<Duration, LockError> {
    if d.is_zero() {
        Err(LockError::invalid(format!("the {what} must not be zero")))
    } else {
        Ok(d)
    }
}

/// Without the `tls` feature a URL is only parsed; `rediss://` gets a hint at the feature.
#[cfg(not(feature = "tls"))]
struct NoTls;

#[cfg(not(feature = "tls"))]
impl NoTls {
    fn connection_info(&self, url: &str) -> Result<redis::ConnectionInfo, LockError> {
        redis::IntoConnectionInfo::into_connection_info(url).map_err(|e| {
            let hint = if url.starts_with("rediss://") {
                " (rediss:// needs the `tls` feature)"
            } else {
                ""
            };
            LockError::invalid(format!("bad Redis URL: {e}{hint}"))
        })
    }
}

fn pool_from(target: redis::ConnectionInfo, connect_timeout: Duration) -> Result<Pool, LockError> {
    // redis-rs has timeouts of its own (1 s to connect, 500 ms per reply). Connecting uses ours;
    // replies are bounded by the timeout `RedisLock` puts around every command (which also
    // replaces a hung connection), so redis-rs's would only be a second timer per command.
    let config = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(connect_timeout))
        .set_response_timeout(None);
    let manager = Manager::new_with_config(target, config)
        .map_err(|e| LockError::invalid(format!("bad Redis URL: {e}")))?;
    Pool::builder(manager)
        .max_size(4)
        .runtime(Runtime::Tokio1)
        .build()
        .map_err(|e| LockError::invalid(format!("cannot make a pool: {e}")))
}

#[cfg(feature = "cluster")]
fn cluster_pool(
    urls: &[String],
    connect_timeout: Duration,
    command_timeout: Duration,
) -> Result<deadpool_redis::cluster::Pool, LockError> {
    let mut config = deadpool_redis::cluster::Config::from_urls(urls.to_vec());
    config.pool = Some(deadpool_redis::PoolConfig::new(4));
    let _ = (connect_timeout, command_timeout); // bounded by our own timeouts around each call
    config
        .create_pool(Some(Runtime::Tokio1))
        .map_err(|e| LockError::invalid(format!("cannot make a cluster pool: {e}")))
}

#[cfg(feature = "sentinel")]
fn sentinel_pool(
    urls: &[String],
    master: &str,
    connect_timeout: Duration,
    command_timeout: Duration,
) -> Result<deadpool_redis::sentinel::Pool, LockError> {
    let mut config = deadpool_redis::sentinel::Config::from_urls(
        urls.to_vec(),
        master.to_owned(),
        deadpool_redis::sentinel::SentinelServerType::Master,
    );
    config.pool = Some(deadpool_redis::PoolConfig::new(4));
    let _ = (connect_timeout, command_timeout); // bounded by our own timeouts around each call
    config
        .create_pool(Some(Runtime::Tokio1))
        .map_err(|e| LockError::invalid(format!("cannot make a sentinel pool: {e}")))
}
