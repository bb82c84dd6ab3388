//! `RedisLock`: the [`Lock`] backend on Redis. The type, its operator methods, and the
//! `impl Lock` that picks the kind's functions (`kinds/`); construction lives with its
//! configuration (`config.rs`).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use lock_core::backend::{
    Attempt, Capabilities, Fencing, Handover, Holder, Lock, LossWatch, MultiAttempt, MultiLock,
    OnLoss, ReleaseWatch, TokenScale, acquire_in_order,
};
use lock_core::{Kind, Lease, LockError, Token, check_name, check_ttl};
use tokio::time::Instant;

use crate::error::BACKEND;
use crate::executor::Executor;
use crate::feeds::subscriber::Subscriber;
use crate::feeds::tracker::Tracker;
use crate::kinds::{Grants, fair, multi, mutex, note, read_write, semaphore};
use crate::layout::{Keys, LockKeys, token_value};
use crate::topology::Topology;

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
    /// Runs every command: connections, command timeout, replicas to confirm. Shared with the
    /// lock's [`RedisFences`](crate::RedisFences), which write on the same connections.
    exec: Arc<Executor>,
    /// Whether fenced writes use the `distlock` function library or its scripts, learned once.
    fences: Arc<crate::fences::FenceState>,
    /// What grants write and how releases announce.
    grants: Grants,
    /// Release announcements for waiters; `None` when built from a pool without a URL.
    subscriber: Option<Subscriber>,
    /// Tells holders at once that their key is gone; `None` when off or not available.
    tracker: Option<Tracker>,
    prefix: String,
}

impl RedisLock {
    /// A lock from its parts (see `config.rs`).
    pub(crate) fn new(
        exec: Executor,
        grants: Grants,
        subscriber: Option<Subscriber>,
        prefix: String,
    ) -> Self {
        Self {
            exec: Arc::new(exec),
            fences: Arc::default(),
            grants,
            subscriber,
            tracker: None,
            prefix,
        }
    }

    /// The same lock with `tracker` watching its holders' keys.
    pub(crate) fn with_tracker(mut self, tracker: Option<Tracker>) -> Self {
        self.tracker = tracker;
        self
    }

    /// Fenced writes to Redis keys on this lock's own connections (one server, the Cluster node
    /// of each key's slot, the master Sentinel names): `distlock_fenced_set`, `_del` and any
    /// script wrapped in a [`FencedScript`](crate::FencedScript). Cheap: clones of two `Arc`s;
    /// every `RedisFences` of one lock shares what it learned about the server (functions or
    /// scripts).
    #[must_use]
    pub fn fences(&self) -> crate::fences::RedisFences {
        crate::fences::RedisFences::new(Arc::clone(&self.exec), Arc::clone(&self.fences))
    }

    /// How long one command may wait for its reply (see
    /// [`RedisLockBuilder::command_timeout`](crate::RedisLockBuilder::command_timeout)).
    #[must_use]
    pub fn command_timeout(&self) -> Duration {
        self.exec.command_timeout()
    }

    /// Which kind of deployment this lock talks to; [`Topology::as_str`] gives its label
    /// (`"single"`, `"cluster"` or `"sentinel"`).
    #[must_use]
    pub fn topology(&self) -> Topology {
        self.exec.topology()
    }

    /// The Redis key of the lock `name`: the prefix followed by the name.
    #[must_use]
    pub fn key(&self, name: &str) -> String {
        self.keys(name).into_key()
    }

    /// The key of the fencing counter of the lock `name`, in the same cluster slot as
    /// [`RedisLock::key`]: `{key}:distlock-fence` when the key has no hash tag, `key:distlock-fence`
    /// when it has one.
    #[must_use]
    pub fn fence_key(&self, name: &str) -> String {
        self.keys(name).fence()
    }

    /// The channel every release of `name` is announced on (an empty message), in the same
    /// cluster slot as its key; waiters subscribe to it through [`Lock::watch`].
    #[must_use]
    pub fn release_channel(&self, name: &str) -> String {
        self.keys(name).released()
    }

    /// Every key and channel of the lock `name`, all in the cluster slot of
    /// [`RedisLock::key`] (see [`LockKeys`]; [`LockKeys::of_kind`] picks those one kind may
    /// write). For operators and tests: `distlock`'s own code never needs the list.
    #[must_use]
    pub fn lock_keys(&self, name: &str) -> LockKeys {
        self.keys(name).listed()
    }

    /// Releases the exclusive lock `name` if its key still holds `token_value` — the plain
    /// string the holder stored (`dl:` + 32 hex characters for a distlock holder, whatever
    /// another client wrote for a foreign one) — and announces the release on its channel, so
    /// waiters wake at once. The same atomic compare-and-delete a guard's release sends: a
    /// holder whose token differs is never touched.
    ///
    /// For operators who read the token from the key (`distlock release NAME --token T`,
    /// like `terraform force-unlock`); code that holds a [`Guard`](lock_core::Guard) releases
    /// through it.
    ///
    /// Returns `true` when the key held `token_value` and was deleted, `false` when it held
    /// another value or did not exist (nothing changed).
    ///
    /// # Errors
    /// [`LockError::InvalidInput`] for an empty or oversized name, a name that ends like a
    /// derived key, or an empty token (nothing sent); [`LockError::Timeout`] or
    /// [`LockError::Backend`] when Redis fails, as for any release.
    ///
    /// # Cancel safety
    /// Dropped before the answer, the release may or may not have run on the server; either
    /// way only a key that held `token_value` was deleted. Ask again to know.
    pub async fn release_token(&self, name: &str, token_value: &str) -> Result<bool, LockError> {
        check_name(name)?;
        if token_value.is_empty() {
            return Err(LockError::invalid("the token to release is empty"));
        }
        let keys = self.checked_keys(name)?;
        mutex::release_value(&self.exec, &self.grants, &keys, token_value).await
    }

    /// The answer to an acquire while the server is in its grace period (see
    /// [`RedisLockBuilder::grace`](crate::RedisLockBuilder::grace)): busy for the time left, as
    /// if a holder that never announces its release held it, so a `Locker` polls and tries
    /// again when it ends. `None` when a grant may be sent.
    /// On a Redis Cluster, the grace of the masters that own the slots of `keys`.
    async fn in_grace(&self, ttl: Duration, keys: &[&str]) -> Result<Option<Attempt>, LockError> {
        Ok(self
            .exec
            .grace_left(ttl, keys)
            .await?
            .map(|left| Attempt::Busy {
                holder_ttl: Some(left),
                announces: false,
            }))
    }

    /// `attempt`, unless it granted on a connection that found the server in its grace period
    /// (the first attempt after a restart connects anew, and learns it only then): that grant
    /// is given back, and the answer is [`Self::in_grace`]'s.
    async fn unless_in_grace(&self, attempt: Attempt, ttl: Duration) -> Result<Attempt, LockError> {
        let Attempt::Acquired(lease) = attempt else {
            return Ok(attempt);
        };
        // Only a Cluster asks by slot: elsewhere no key is built on the grant path.
        let key = if self.topology() == Topology::Cluster {
            self.key(lease.name())
        } else {
            String::new()
        };
        match self.exec.grace_left(ttl, &[&key]).await {
            Ok(None) => Ok(Attempt::Acquired(lease)),
            refused => {
                // Boxed: rare, and inline it would grow every acquire's future.
                Box::pin(self.give_back(&lease)).await;
                Ok(Attempt::Busy {
                    holder_ttl: refused?,
                    announces: false,
                })
            }
        }
    }

    /// Releases a grant made during a grace period (best effort: it expires with its TTL).
    async fn give_back(&self, lease: &Lease) {
        if let Err(error) = Lock::release(self, lease).await {
            tracing::debug!(%error, "giving back a grant made in a grace period failed; it expires with its TTL");
        }
    }

    /// The keys of the lock `name`.
    fn keys(&self, name: &str) -> Keys {
        Keys::new(&self.prefix, name)
    }

    /// The keys of the lock `name`, refused when its key ends like one of distlock's derived
    /// keys: for every operation that may create a lock.
    /// The executor every command goes through (for the operator reads of `inspect/`).
    pub(crate) fn executor(&self) -> &Executor {
        &self.exec
    }

    /// The key prefix of every lock.
    pub(crate) fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The release subscriber, when the lock has a pub/sub connection.
    pub(crate) fn subscriber(&self) -> Option<&Subscriber> {
        self.subscriber.as_ref()
    }

    fn checked_keys(&self, name: &str) -> Result<Keys, LockError> {
        Keys::checked(&self.prefix, name)
    }

    /// A read share or the write lock (`kind`) of `name`: one script, the same for both
    /// (`kinds/read_write.rs`), within the grace period's checks.
    async fn read_write(
        &self,
        name: &str,
        kind: Kind,
        token: Token,
        ttl: Duration,
    ) -> Result<Attempt, LockError> {
        let (keys, ttl_ms) = match self.for_grant(name, ttl).await? {
            Ok(grant) => grant,
            Err(busy) => return Ok(busy),
        };
        let (exec, grants) = (&self.exec, &self.grants);
        let attempt =
            read_write::try_acquire(exec, grants, &keys, name, kind, token, ttl_ms).await?;
        self.unless_in_grace(attempt, ttl).await
    }

    /// What a grant of a kind other than the mutex starts from: the keys of `name` and `ttl`
    /// in milliseconds, or (`Err`) the busy answer of a server in its grace period.
    async fn for_grant(
        &self,
        name: &str,
        ttl: Duration,
    ) -> Result<Result<(Keys, u64), Attempt>, LockError> {
        let ttl_ms = check_ttl(ttl)?;
        let keys = self.checked_keys(name)?;
        match self.in_grace(ttl, &[keys.key()]).await? {
            Some(busy) => Ok(Err(busy)),
            None => Ok(Ok((keys, ttl_ms))),
        }
    }
}

#[async_trait]
impl Lock for RedisLock {
    fn backend(&self) -> &'static str {
        BACKEND
    }

    /// Every kind. The multi-lock in one script on a single server or a Sentinel-watched
    /// primary; on a Cluster one name after the other, because names in different slots cannot
    /// share a script. Fencing tokens `max(clock in µs, counter + 1)` per name, strict; none
    /// (0) with [`fencing(false)`](crate::RedisLockBuilder::fencing), the user's opt-out. Releases
    /// announced when the lock has a pub/sub connection (built with a URL, or a pool plus
    /// [`pubsub_url`](crate::RedisLockBuilder::pubsub_url)). Holder descriptions (what leader
    /// election's observers read) when grants carry fencing tokens: without them there is no
    /// term to describe.
    fn inspector(&self) -> Option<&dyn lock_core::backend::Inspect> {
        Some(self)
    }

    fn capabilities(&self) -> Capabilities {
        let multi = if self.topology() == Topology::Cluster {
            MultiLock::InOrder
        } else {
            MultiLock::Atomic
        };
        let fencing = if self.grants.fencing() {
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
            .with_holders(self.grants.fencing())
            // `RedisLock::fences`: the `distlock` function library (Redis and Valkey 7+).
            .with_guarded_writes(self.grants.fencing())
    }

    async fn try_acquire(
        &self,
        name: &str,
        token: Token,
        ttl: Duration,
    ) -> Result<Attempt, LockError> {
        let ttl_ms = check_ttl(ttl)?;
        let keys = self.checked_keys(name)?;
        if let Some(busy) = self.in_grace(ttl, &[keys.key()]).await? {
            return Ok(busy);
        }
        let attempt =
            mutex::try_acquire(&self.exec, &self.grants, &keys, name, token, ttl_ms).await?;
        self.unless_in_grace(attempt, ttl).await
    }

    /// Read shares, write locks, permits and the fair lock through their own scripts (see the
    /// crate README, "Read-write locks and semaphores").
    async fn try_acquire_read(
        &self,
        name: &str,
        writer_preference: bool,
        token: Token,
        ttl: Duration,
    ) -> Result<Attempt, LockError> {
        let kind = Kind::Read { writer_preference };
        self.read_write(name, kind, token, ttl).await
    }

    async fn try_acquire_write(
        &self,
        name: &str,
        writer_preference: bool,
        token: Token,
        ttl: Duration,
    ) -> Result<Attempt, LockError> {
        let kind = Kind::Write { writer_preference };
        self.read_write(name, kind, token, ttl).await
    }

    async fn try_acquire_semaphore(
        &self,
        name: &str,
        permits: u32,
        max: u32,
        token: Token,
        ttl: Duration,
    ) -> Result<Attempt, LockError> {
        let (keys, ttl_ms) = match self.for_grant(name, ttl).await? {
            Ok(grant) => grant,
            Err(busy) => return Ok(busy),
        };
        let (exec, grants) = (&self.exec, &self.grants);
        let attempt =
            semaphore::try_acquire(exec, grants, &keys, name, permits, max, token, ttl_ms).await?;
        self.unless_in_grace(attempt, ttl).await
    }

    async fn try_acquire_fair(
        &self,
        name: &str,
        queued: bool,
        token: Token,
        ttl: Duration,
    ) -> Result<Attempt, LockError> {
        let (keys, ttl_ms) = match self.for_grant(name, ttl).await? {
            Ok(grant) => grant,
            Err(busy) => return Ok(busy),
        };
        let (exec, grants) = (&self.exec, &self.grants);
        let attempt = fair::try_acquire(exec, grants, &keys, name, queued, token, ttl_ms).await?;
        self.unless_in_grace(attempt, ttl).await
    }

    async fn permits_in_use(&self, name: &str) -> Result<u32, LockError> {
        let keys = self.checked_keys(name)?;
        semaphore::in_use(&self.exec, &keys).await
    }

    /// One script for every name when they share a server (or a cluster slot); else one
    /// after the other ([`acquire_in_order`]).
    async fn try_acquire_all(
        &self,
        names: &[Arc<str>],
        token: Token,
        ttl: Duration,
    ) -> Result<MultiAttempt, LockError> {
        let ttl_ms = check_ttl(ttl)?;
        let keys = names
            .iter()
            .map(|name| self.checked_keys(name))
            .collect::<Result<Vec<_>, _>>()?;
        let key_names: Vec<&str> = keys.iter().map(Keys::key).collect();
        if let Some(Attempt::Busy {
            holder_ttl,
            announces,
        }) = self.in_grace(ttl, &key_names).await?
        {
            return Ok(MultiAttempt::Busy {
                index: 0,
                holder_ttl,
                announces,
            });
        }
        let attempt =
            match multi::try_in_one_script(&self.exec, &self.grants, &keys, names, token, ttl_ms)
                .await?
            {
                Some(attempt) => attempt,
                None => acquire_in_order(self, names, token, ttl).await?,
            };
        let MultiAttempt::Acquired(leases) = attempt else {
            return Ok(attempt);
        };
        match self.exec.grace_left(ttl, &key_names).await {
            Ok(None) => Ok(MultiAttempt::Acquired(leases)),
            refused => {
                for lease in &leases {
                    self.give_back(lease).await;
                }
                Ok(MultiAttempt::Busy {
                    index: 0,
                    holder_ttl: refused?,
                    announces: false,
                })
            }
        }
    }

    async fn extend(&self, lease: &Lease, ttl: Duration) -> Result<Option<Instant>, LockError> {
        let ttl_ms = check_ttl(ttl)?;
        let keys = self.keys(lease.name());
        match lease.kind() {
            // A fair lease is the mutex's key: the same compare-and-pexpire.
            Kind::Mutex | Kind::Fair { .. } => {
                mutex::extend(&self.exec, &self.grants, &keys, lease, ttl_ms).await
            }
            Kind::Read { .. } | Kind::Write { .. } => {
                read_write::extend(&self.exec, &keys, lease, ttl_ms).await
            }
            _ => semaphore::extend(&self.exec, &keys, lease, ttl_ms).await,
        }
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
        let keys = self.keys(lease.name());
        mutex::hand_over(&self.exec, &self.grants, &keys, lease, to, ttl_ms).await
    }

    async fn release(&self, lease: &Lease) -> Result<bool, LockError> {
        let keys = self.keys(lease.name());
        let (exec, grants) = (&self.exec, &self.grants);
        match lease.kind() {
            Kind::Mutex => mutex::release(exec, grants, &keys, lease).await,
            Kind::Read { .. } | Kind::Write { .. } => {
                read_write::release(exec, grants, &keys, lease).await
            }
            // Fair leases tell the queue's head.
            Kind::Fair { .. } => fair::release(exec, grants, &keys, lease).await,
            _ => semaphore::release(exec, grants, &keys, lease).await,
        }
    }

    /// One EVALSHA of `lua/describe_holder.lua`: the key, its PTTL, the note key and the
    /// fencing counter read in one atomic step, decoded by
    /// [`HolderReplies::holder`](crate::HolderReplies::holder), the one reader `distlock`
    /// uses too. The note is the one written beside the holder's grant ([`Lock::annotate`], or
    /// the grant's own description with holder metadata). The fencing token is the one the
    /// holder's note carries; without one, the fencing counter's value for
    /// a distlock holder (a `dl:` token: the last fence issued is its own), and 0 for a
    /// foreign holder (redis-py, node-redlock) or a holder whose lock was built with
    /// [`fencing(false)`](crate::RedisLockBuilder::fencing) while the counter is absent. (A
    /// `fencing(false)` holder whose name also had fenced grants shows the counter's last
    /// fence until it writes a note: that lock declares no holder descriptions.)
    ///
    /// # Errors
    /// [`LockError::InvalidInput`] for a bad name or one that ends like a derived key;
    /// [`LockError::WrongType`] when the lock key holds another type;
    /// [`LockError::Timeout`] / [`LockError::Backend`] when Redis fails.
    ///
    /// # Cancel safety
    /// Cancel safe: it changes nothing.
    async fn describe_holder(&self, name: &str) -> Result<Option<Holder>, LockError> {
        check_name(name)?;
        let keys = self.checked_keys(name)?;
        note::describe(&self.exec, &keys).await
    }

    /// One EVALSHA of `lua/annotate.lua`: if the key still holds the lease's token, `SET` the
    /// note key to the token, the fencing token and `note`, kept for the fencing counter's
    /// retention ([`fence_retention`](crate::RedisLockBuilder::fence_retention)) rather than
    /// the lease's TTL, so renewals never touch it; the token in the record keeps it from ever
    /// being shown with a later grant. `Ok(false)` for a lease that is no longer ours, or of a
    /// kind other than the mutex and the fair lock. The write is not confirmed by replicas
    /// ([`ReplicaPolicy`](crate::ReplicaPolicy)): a note lost in a failover reads as none.
    ///
    /// # Errors
    /// [`LockError::InvalidInput`] for a note over [`MAX_NOTE_BYTES`](crate::MAX_NOTE_BYTES)
    /// (nothing sent); [`LockError::WrongType`] when the lock key holds another
    /// type; [`LockError::Timeout`] / [`LockError::Backend`] when Redis fails.
    ///
    /// # Cancel safety
    /// Cancel safe: dropped, the note is written or not.
    async fn annotate(&self, lease: &Lease, note: &[u8]) -> Result<bool, LockError> {
        let keys = self.keys(lease.name());
        note::annotate(&self.exec, &self.grants, &keys, lease, note).await
    }

    /// Connects if there is no connection, then sends one `PING`, both bounded by their
    /// timeouts.
    async fn ping(&self) -> Result<(), LockError> {
        self.exec.ping().await
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
                let channel = self.keys(name).turn(token_value(token).as_str());
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

    /// Watches the key of a held mutex or fair lock through the lock's tracking connection
    /// (see [`track_losses`](crate::RedisLockBuilder::track_losses)); `None` for the other
    /// kinds (their keys hold many holders, whose changes are not losses), and when tracking
    /// is off or refused.
    fn watch_loss(&self, lease: &Lease, on_loss: OnLoss) -> Option<LossWatch> {
        if !matches!(lease.kind(), Kind::Mutex | Kind::Fair { .. }) {
            return None;
        }
        let tracker = self.tracker.as_ref()?;
        tracker.watch(lease, on_loss)
    }
}

impl fmt::Debug for RedisLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisLock")
            .field("prefix", &self.prefix)
            .field("command_timeout", &self.command_timeout())
            .field("fence_retention_ms", &self.grants.fence_retention_ms())
            .field("fencing", &self.grants.fencing())
            .field("topology", &self.topology().as_str())
            .finish_non_exhaustive()
    }
}
