//! Building a [`RedisLock`]: its constructors and its builder, whose `build` checks the
//! settings, opens the connection source (`source.rs`) and assembles the lock
//! (`settings.rs`). The lock's own file never names its configuration, so they import one way.

use std::time::Duration;

use deadpool_redis::Pool;
use lock_core::LockError;

use crate::connection::conn::Source;
use crate::connection::replication::{ReplicaPolicy, Replication};
use crate::connection::source::SourceSettings;
use crate::holder::Describe;
use crate::redis_lock::RedisLock;
use crate::safety::grace::{DEFAULT_GRACE, GraceSettings};
use crate::settings::{
    DEFAULT_CONNECT_TIMEOUT, DEFAULT_FENCE_RETENTION, DEFAULT_OPERATION_TIMEOUT,
    DEFAULT_SUBSCRIBER_PING_INTERVAL, DEFAULT_TRACK_LOSSES_AFTER, Settings, assemble,
};

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
    /// Where Redis is: URL, pool, cluster, sentinels, pub/sub URL, TLS.
    source: SourceSettings,
    replication: Option<Replication>,
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
    loss_tracking: Option<bool>,
    loss_tracking_after: Option<Duration>,
}

impl RedisLockBuilder {
    /// Connect with a `redis://` (or `unix://`) URL; credentials and database go in the URL
    /// (`redis://user:password@host:port/db`). A pool of up to 4 connections is made, of which
    /// the lock keeps one in use (see the crate docs). With the `tls` feature, `rediss://`
    /// connects over TLS (see [`tls_ca_cert`](RedisLockBuilder::tls_ca_cert)).
    pub fn url(mut self, url: impl Into<String>) -> Self {
        self.source.url = Some(url.into());
        self
    }

    /// Use an existing pool instead of a URL. Release announcements then need
    /// [`pubsub_url`](RedisLockBuilder::pubsub_url).
    pub fn pool(mut self, pool: Pool) -> Self {
        self.source.pool = Some(pool);
        self
    }

    /// Lock on a Redis Cluster reached through these node URLs (some or all of its nodes; the
    /// client discovers the rest). All keys of one lock share a hash slot, so each operation
    /// is one script on the node that owns it; MOVED and ASK redirections and NOSCRIPT on a
    /// node the script never reached are handled by the client. Release announcements use
    /// sharded pub/sub (`SPUBLISH`/`SSUBSCRIBE`), answered by the slot's own node.
    #[cfg(feature = "cluster")]
    pub fn cluster_urls<S: Into<String>>(mut self, urls: impl IntoIterator<Item = S>) -> Self {
        self.source.cluster_urls = Some(urls.into_iter().map(Into::into).collect());
        self
    }

    /// Lock on a Redis Cluster through an existing cluster pool. Release announcements then
    /// need the nodes' URLs: give them with [`cluster_urls`](RedisLockBuilder::cluster_urls) too
    /// (used only by the subscriber).
    #[cfg(feature = "cluster")]
    pub fn cluster_pool(mut self, pool: deadpool_redis::cluster::Pool) -> Self {
        self.source.cluster_pool = Some(pool);
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
        self.source.sentinel = Some((
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
        self.source.pubsub_url = Some(url.into());
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
        self.source.tls.ca_cert_pem = Some(pem.into());
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
        self.source.tls.client_cert = Some((cert_pem.into(), key_pem.into()));
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

    /// How long one command may wait for its reply (default [`DEFAULT_OPERATION_TIMEOUT`]).
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

    /// Whether a holder is told at once that its key is gone (default: yes, where release
    /// announcements are on and the deployment is one server or Sentinel's master).
    ///
    /// A held mutex or fair lock whose key is deleted (an operator's `release --force`, an
    /// eviction, an empty restart, a failover that lost it) or overwritten by another client
    /// is then marked lost within milliseconds, and its guard's `lost()` fires, instead of at
    /// its next renewal (a third of the lease later). It rides a RESP3 connection per
    /// `RedisLock` and tokio runtime with `CLIENT TRACKING ON` (the crate README gives the
    /// design and its costs). Only leases still held after
    /// [`track_losses_after`](RedisLockBuilder::track_losses_after) are watched. Where the
    /// server or a proxy refuses RESP3 or `CLIENT TRACKING`, the refusal is seen once and
    /// losses are seen at renewal, as with `false`. Not on a Redis Cluster (each node would
    /// need a tracking connection of its own): there losses are seen at renewal.
    pub fn track_losses(mut self, on: bool) -> Self {
        self.loss_tracking = Some(on);
        self
    }

    /// How long a lease must have been held before its key is watched for loss (default
    /// [`DEFAULT_TRACK_LOSSES_AFTER`], 200 ms; see
    /// [`track_losses`](RedisLockBuilder::track_losses)), counted from when the `Locker`'s
    /// watchdog hands the lease over (within about a second of the grant: see
    /// `lock_core::backend::Lock::watch_loss`). Holds shorter than this cost nothing
    /// on the server; a longer hold costs one read of its key when it comes due and one push
    /// and one read per renewal. A loss before it is seen at the next renewal, as without
    /// tracking. `Duration::ZERO` watches every lease from its grant.
    pub fn track_losses_after(mut self, after: Duration) -> Self {
        self.loss_tracking_after = Some(after);
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
    /// as JSON, written as the grant's note (`{key}:distlock-note`, the key
    /// [`Lock::annotate`](lock_core::backend::Lock::annotate) writes: the grant's token, its
    /// fencing token, the note) beside the lock key — in its cluster slot, written by the
    /// acquire script itself (no extra round trip), expiring, renewed, handed over and deleted
    /// with the lease. [`Lock::describe_holder`](lock_core::backend::Lock::describe_holder)
    /// returns it as the holder's note, and `distlock ls` and `distlock show` print it; a note
    /// the holder writes later replaces it. The lock key's value stays the plain token, so
    /// redis-py and node-redlock interop is unchanged. Mutex grants only (the read-write lock,
    /// the semaphore and the fair lock write none), and only with fencing on (the description
    /// is written by the fenced acquire script). Leader election writes its own record as the
    /// note: a candidate needs no holder metadata.
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
    /// `LockError::Busy`), and [`metric::GRACE_REFUSED_TOTAL`](crate::metric::GRACE_REFUSED_TOTAL)
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
    /// leases without [`holder_metadata`](Self::holder_metadata), whose description (the
    /// grant's note) must be deleted and extended with the lock, and not on a Redis Cluster (see the crate README,
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
        let settings = self.validated()?;
        let opened = self
            .source
            .open(settings.connect_timeout, settings.command_timeout)?;
        Ok(assemble(
            opened.source,
            Settings {
                pubsub: opened.pubsub.filter(|_| self.announcements.unwrap_or(true)),
                server: opened.server,
                ..settings
            },
        ))
    }

    /// The settings past the connection source, checked, with their defaults filled in; the
    /// subscriber's origin and the server's label are the source's.
    fn validated(&self) -> Result<Settings, LockError> {
        let fencing = self.fencing.unwrap_or(true);
        if self.holder_metadata && !fencing {
            return Err(LockError::invalid(
                "holder metadata is written by the fenced acquire script: it needs fencing on",
            ));
        }
        let connect_timeout = positive(
            "connect timeout",
            self.connect_timeout.unwrap_or(DEFAULT_CONNECT_TIMEOUT),
        )?;
        let command_timeout = positive(
            "command timeout",
            self.command_timeout.unwrap_or(DEFAULT_OPERATION_TIMEOUT),
        )?;
        let fence_retention = self.fence_retention.unwrap_or(DEFAULT_FENCE_RETENTION);
        lock_core::check_ttl(fence_retention).map_err(|_| {
            LockError::invalid(format!(
                "the fence retention {fence_retention:?} is out of range"
            ))
        })?;
        let grace = self.grace.unwrap_or(DEFAULT_GRACE);
        if grace > lock_core::MAX_TTL {
            return Err(LockError::invalid(format!(
                "the grace period {grace:?} is above the maximum TTL"
            )));
        }
        Ok(Settings {
            prefix: self.prefix.clone(),
            connect_timeout,
            command_timeout,
            fence_retention,
            fencing,
            holder: self
                .holder_metadata
                .then(|| Describe::here(self.holder_note.as_deref())),
            pubsub: None,
            replication: self.replication,
            grace: GraceSettings {
                grace,
                strict: self.strict,
            },
            server: String::new(),
            native_commands: self.native_commands.unwrap_or(true),
            subscriber_ping: self
                .subscriber_ping
                .unwrap_or(DEFAULT_SUBSCRIBER_PING_INTERVAL),
            loss_tracking: self.loss_tracking.unwrap_or(true).then(|| {
                self.loss_tracking_after
                    .unwrap_or(DEFAULT_TRACK_LOSSES_AFTER)
            }),
        })
    }
}

impl std::fmt::Debug for RedisLockBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisLockBuilder")
            .field("url", &self.source.url)
            .field("prefix", &self.prefix)
            .field("connect_timeout", &self.connect_timeout)
            .field("command_timeout", &self.command_timeout)
            .finish_non_exhaustive()
    }
}

fn positive(what: &str, d: Duration) -> Result<Duration, LockError> {
    if d.is_zero() {
        Err(LockError::invalid(format!("the {what} must not be zero")))
    } else {
        Ok(d)
    }
}
