//! [`EtcdLock`]: the type and its one `impl Lock`, which picks the kind (the kinds are the
//! functions of `kinds/`, over the executor, which sends the requests).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use etcd_client::{Client, GetOptions, Txn, TxnOp, TxnOpResponse, TxnResponse};
use lock_core::backend::{
    Attempt, Capabilities, Fencing, Handover, Holder, Inspect, Lock, MultiAttempt, MultiLock,
    ReleaseWatch, TokenScale,
};
use lock_core::{Kind, Lease, LockError, Op, TimeoutPhase, Token};
use tokio::time::Instant;

use crate::error::{BACKEND, bounded};
use crate::executor::Executor;
use crate::kinds::{fair, multi, mutex, note, read_write, semaphore};
use crate::layout;
use crate::renew;
use crate::{fence, held};

/// What this backend offers: every kind (mutex, read-write, semaphore, fair), the multi-lock in one transaction, fencing tokens
/// that are etcd revisions (one counter for the whole cluster, kept through restarts and
/// leader changes), releases announced through a watch, and holder descriptions (a note
/// beside the grant, on its etcd lease; `kinds/note.rs`).
const CAPABILITIES: Capabilities = Capabilities::MUTEX
    .with_semaphore()
    .with_fair()
    .with_read_write()
    .with_multi(MultiLock::Atomic)
    .with_fencing(Fencing::Strict(TokenScale::Counter))
    .with_announcements(true)
    .with_holders(true)
    // `EtcdLock::guarded_commit`: a record per resource, compared and raised in one `Txn`.
    .with_guarded_writes(true);

/// A lock backend on etcd: a grant is a committed Raft entry, so it survives the loss of any
/// minority of members, restarts and leader changes, and the fencing token is the revision of
/// the transaction that wrote the grant.
///
/// - `try_acquire` (a fixed TTL): one transaction: if the key's `create_revision` is 0
///   (absent), put the token on the bucket lease of its TTL (one etcd lease per TTL and 1–4 s
///   bucket, never kept alive, granted when the current one would end before the grant's
///   validity; the crate README, "Bucket leases for fixed grants"), else read the holder.
///   Granted: the fencing token is the put's revision. Busy: the holder's remaining etcd lease
///   TTL (on a bucket lease, less the bucket), and whether it announces (a distlock value).
///   `try_acquire_renewed` is the same on the shared lease the watchdog keeps alive.
/// - `extend`: a keep-alive of the etcd lease, and a check that the key still holds the token;
///   a mutex key on a bucket lease is moved to a lease of its own first.
/// - `release`: one transaction (if the value is the token, delete the key), then a lease of
///   the grant's own, if its key was on one, is revoked in the background.
/// - `hand_over`: one transaction (if the value is the old token, put the new one on the
///   bucket lease of the TTL): a new revision, so a new fencing token.
/// - `try_acquire_all`: every name's etcd lease, then one transaction over every key.
/// - the semaphore (`try_acquire_kind`): a key per holder, granted by its rank in creation
///   revision order (the crate README, "The semaphore").
/// - the read-write lock (`try_acquire_kind`): the writer is the lock key, each reader a key of
///   its own (the crate README, "The read-write lock").
/// - the fair lock (`try_acquire_kind`): a queue entry per waiter, the head by creation
///   revision (the crate README, "The fair lock").
/// - `watch`: one watch per runtime on the key prefix (deletions only).
/// - `guarded_txn` / `guarded_commit` (not of the `Lock` trait): the fence every distlock store
///   keeps, taking a [`Fence`](lock_core::Fence): the user's operations in one transaction that
///   admits them iff the token is ≥ the resource's record and raises it (the crate README,
///   "Guarded writes"). `held_txn` / `held_commit`: stronger, etcd's own, the operations only
///   while a guard's grant is the current one.
/// - `annotate`: one transaction (if the key holds the token, put the note key on the grant's
///   etcd lease); `describe_holder`: one transaction reading the key and the note key, then
///   the etcd lease's TTL (the crate README, "Holder descriptions").
///
/// Cheap to clone (the clients, the watch feeds and the settings are shared).
#[derive(Debug, Clone)]
pub struct EtcdLock {
    inner: Arc<Executor>,
}

impl EtcdLock {
    /// The lock over `inner`, which the builder assembled.
    pub(crate) fn from_executor(inner: Executor) -> Self {
        Self {
            inner: Arc::new(inner),
        }
    }

    /// The shared state and requests every operation uses (the inspector's too).
    pub(crate) fn executor(&self) -> &Executor {
        &self.inner
    }

    /// The prefix before every lock name.
    #[must_use]
    pub fn prefix(&self) -> &str {
        self.inner.prefix()
    }

    /// The members' client URLs this lock was given.
    #[must_use]
    pub fn endpoints(&self) -> &[String] {
        &self.inner.target.endpoints
    }

    /// The etcd key of the lock `name` (the prefix, then the name).
    #[must_use]
    pub fn key(&self, name: &str) -> Vec<u8> {
        self.inner.key(name)
    }

    /// The etcd client of the current tokio runtime, connected if it was not: for tools that
    /// look at the keys (`distlock ls`) and for tests.
    ///
    /// # Errors
    /// A `Connect` timeout, or [`LockError::Backend`] (bad credentials are not retryable).
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn client(&self) -> Result<Client, LockError> {
        self.inner.client().await
    }

    /// The guarded write of `ops` with `fence` (from a guard: `guard.fence()`, or
    /// `guard.fence().for_resource("orders/42")`), as every distlock store keeps it: one
    /// transaction that applies `ops` iff `fence.token` is ≥ the largest token
    /// `fence.resource` has accepted (equal is accepted: one holder writes many times under
    /// one grant), and raises that record to it. Send it with any client of the same cluster;
    /// `succeeded()` false with a failed inner transaction means refused, and nothing applied.
    /// [`EtcdLock::guarded_commit`] sends it and reads the answer for you. The record is the key
    /// `prefix + "\0acc/" + len + ":" + resource + "/"`.
    ///
    /// # Errors
    /// [`LockError::InvalidInput`] for an empty resource name or one longer than a lock name
    /// may be. Sends nothing.
    pub fn guarded_txn(
        &self,
        fence: &lock_core::Fence,
        ops: impl Into<Vec<TxnOp>>,
    ) -> Result<Txn, LockError> {
        fence::txn(self.prefix(), fence, ops.into())
    }

    /// Sends the [guarded write](EtcdLock::guarded_txn) of `ops` with `fence` on this lock's
    /// client: the answers of `ops`, in order, when the fence admitted them.
    ///
    /// # Errors
    /// [`LockError::Fenced`] `{ resource, token, current }` when `fence.token` is below the
    /// record `current` (a later grant's holder wrote first): nothing applied.
    /// [`LockError::InvalidInput`] as [`EtcdLock::guarded_txn`] (nothing sent).
    /// [`LockError::Timeout`] (command timeout) / [`LockError::Backend`] (with
    /// [`Op::Write`](lock_core::Op::Write)) when etcd fails: the transaction may have been
    /// applied or not.
    ///
    /// # Cancel safety
    /// Not cancel safe: dropped once sent, the transaction may or may not have committed (as
    /// any etcd write).
    pub async fn guarded_commit(
        &self,
        fence: &lock_core::Fence,
        ops: impl Into<Vec<TxnOp>>,
    ) -> Result<Vec<TxnOpResponse>, LockError> {
        let txn = fence::txn(self.prefix(), fence, ops.into())?;
        let client = self.client().await?;
        let answer = self.inner.txn(&client, Op::Write, txn).await?;
        fence::outcome(fence, &answer)
    }

    /// An etcd transaction that commits only while `guard`'s grant still holds the lock: its
    /// `when` already compares the lock key's value with the grant's and its `mod_revision`
    /// with the guard's fencing token (for a read share: the reader's key and the name's fence
    /// key). Add the writes with `.and_then([...])` (and `.or_else` if you like; the compares
    /// are set, so `.when` may not be called again) and send it with any client of the same
    /// cluster ([`EtcdLock::client`] if you have none). `succeeded()` false means the guard no
    /// longer holds the lock and nothing of `and_then` applied. Stronger than a fence: the
    /// compare and the writes are one transaction at one revision, so the writes commit only
    /// while the grant is etcd's current one, linearizably (the crate README, "Guarded
    /// writes"). [`EtcdLock::held_commit`] sends it and maps a refusal to
    /// [`LockError::Fenced`]. Where the fence of every store is enough, prefer
    /// [`EtcdLock::guarded_txn`]: the same shape on every backend.
    ///
    /// A guard of another backend (or another etcd cluster or prefix) names a key that does
    /// not hold its token at its revision: the compare fails and nothing commits.
    ///
    /// # Errors
    /// [`LockError::InvalidInput`] for a semaphore guard (permits carry fencing token 0), a
    /// guard with fencing token 0 of another kind (not an etcd grant), or a name etcd's layout
    /// refuses. Sends nothing.
    pub fn held_txn(&self, guard: &lock_core::Guard) -> Result<Txn, LockError> {
        let guarded = held::guard_compares(self.prefix(), &guard.lease())?;
        Ok(Txn::new().when(guarded.compares))
    }

    /// Sends `ops` in a [held transaction](EtcdLock::held_txn) of `guard` on this
    /// lock's client: the answer (one `op_responses()` entry per op of `ops`, in order) when
    /// the guard still held the lock, so every op applied.
    ///
    /// # Errors
    /// [`LockError::Fenced`] when the guard no longer holds the lock and nothing applied:
    /// `resource` is the lock name, `token` the guard's fencing token, `current` the
    /// successor's fencing token (the key's revision, read in the same transaction), or, with
    /// no holder now, the store's revision at the refusal (every later grant's token is above
    /// it). [`LockError::InvalidInput`] as [`EtcdLock::held_txn`] (nothing sent).
    /// [`LockError::Timeout`] (command timeout) / [`LockError::Backend`] (with
    /// [`Op::Write`](lock_core::Op::Write)) when etcd fails: the transaction may have been
    /// applied or not.
    ///
    /// # Cancel safety
    /// Not cancel safe: dropped once sent, the transaction may or may not have committed (as
    /// any etcd write; a committed one applied while the guard held the lock).
    pub async fn held_commit(
        &self,
        guard: &lock_core::Guard,
        ops: impl Into<Vec<TxnOp>>,
    ) -> Result<TxnResponse, LockError> {
        let lease = guard.lease();
        let guarded = held::guard_compares(self.prefix(), &lease)?;
        let client = self.client().await?;
        let read_back = held::read_back(&guarded);
        let txn = Txn::new()
            .when(guarded.compares)
            .and_then(ops)
            .or_else([read_back]);
        let answer = self.inner.txn(&client, Op::Write, txn).await?;
        if answer.succeeded() {
            Ok(answer)
        } else {
            Err(held::fenced(&lease, &answer))
        }
    }
}

#[async_trait]
impl Lock for EtcdLock {
    fn backend(&self) -> &'static str {
        BACKEND
    }

    async fn try_acquire(
        &self,
        name: &str,
        token: Token,
        ttl: Duration,
    ) -> Result<Attempt, LockError> {
        layout::check_name(name)?;
        mutex::try_acquire(&self.inner, name, token, ttl).await
    }

    /// The mutex on the shared etcd lease of renewed grants: one transaction, no lease grant
    /// (`shared.rs`).
    async fn try_acquire_renewed(
        &self,
        name: &str,
        token: Token,
        ttl: Duration,
    ) -> Result<Attempt, LockError> {
        layout::check_name(name)?;
        mutex::try_acquire_shared(&self.inner, name, token, ttl).await
    }

    async fn try_acquire_read(
        &self,
        name: &str,
        writer_preference: bool,
        token: Token,
        ttl: Duration,
    ) -> Result<Attempt, LockError> {
        layout::check_name(name)?;
        read_write::try_read(&self.inner, name, writer_preference, token, ttl).await
    }

    async fn try_acquire_write(
        &self,
        name: &str,
        writer_preference: bool,
        token: Token,
        ttl: Duration,
    ) -> Result<Attempt, LockError> {
        layout::check_name(name)?;
        read_write::try_write(&self.inner, name, writer_preference, token, ttl).await
    }

    async fn try_acquire_semaphore(
        &self,
        name: &str,
        permits: u32,
        max: u32,
        token: Token,
        ttl: Duration,
    ) -> Result<Attempt, LockError> {
        layout::check_name(name)?;
        semaphore::try_acquire(&self.inner, name, permits, max, token, ttl).await
    }

    async fn try_acquire_fair(
        &self,
        name: &str,
        queued: bool,
        token: Token,
        ttl: Duration,
    ) -> Result<Attempt, LockError> {
        layout::check_name(name)?;
        fair::try_acquire(&self.inner, name, queued, token, ttl).await
    }

    async fn permits_in_use(&self, name: &str) -> Result<u32, LockError> {
        semaphore::in_use(&self.inner, name).await
    }

    async fn try_acquire_all(
        &self,
        names: &[Arc<str>],
        token: Token,
        ttl: Duration,
    ) -> Result<MultiAttempt, LockError> {
        for name in names {
            layout::check_name(name)?;
        }
        multi::try_acquire_all(&self.inner, names, token, ttl).await
    }

    async fn extend(&self, lease: &Lease, ttl: Duration) -> Result<Option<Instant>, LockError> {
        let mut answers = renew::extend_many(&self.inner, &[(lease.clone(), ttl)]).await;
        answers.pop().unwrap_or(Ok(None))
    }

    /// One keep-alive per shared etcd lease (when it was not kept alive recently) and one read
    /// of every mutex key of the batch, side by side: a grant whose key is gone or carries
    /// another token is lost (`renew.rs`).
    async fn extend_many(
        &self,
        leases: &[(Lease, Duration)],
    ) -> Vec<Result<Option<Instant>, LockError>> {
        renew::extend_many(&self.inner, leases).await
    }

    /// The fair lock's queue entry and a waiting writer's record go with their token, granted
    /// or not; every other kind holds one key.
    async fn release(&self, lease: &Lease) -> Result<bool, LockError> {
        match lease.kind() {
            Kind::Fair { .. } => fair::release(&self.inner, lease).await,
            Kind::Write {
                writer_preference: true,
            } => read_write::release_writer(&self.inner, lease).await,
            _ => mutex::release(&self.inner, lease).await,
        }
    }

    async fn hand_over(
        &self,
        lease: &Lease,
        to: Token,
        ttl: Duration,
    ) -> Result<Handover, LockError> {
        mutex::hand_over(&self.inner, lease, to, ttl).await
    }

    async fn watch(&self, name: &str) -> Result<Option<ReleaseWatch>, LockError> {
        let inner = &self.inner;
        inner
            .watches
            .watch(
                &inner.clients,
                &inner.target,
                inner.prefix.as_bytes(),
                self.key(name),
            )
            .await
            .map(Some)
    }

    /// One `Txn` reading the lock key and its note key `\0note/…/` together, then one
    /// `LeaseTimeToLive` of the key's etcd lease (a second request: etcd has no lease TTL in a
    /// transaction). The term (`fencing_token`) is the revision of the grant or hand-over that
    /// wrote the current holder, which is the fencing token that grant returned: the lock key's
    /// `mod_revision`, or, for a fixed grant an extend moved to a lease of its own, its grant
    /// time's `create_revision` (read in the same `Txn`); renewals do not change it. A holder written by another client (no `dl:`
    /// value) has term 0 and no note. The TTL is in etcd's whole seconds (rounded down), zero
    /// when the etcd lease ran out between the two requests, `None` for a key without one.
    /// `None` when the key is absent. A reader of the read-write lock or a semaphore holder is
    /// not a holder of the mutex: `None` for them.
    ///
    /// # Errors
    /// [`LockError::Timeout`] (command timeout, per request) / [`LockError::Backend`] when
    /// etcd fails.
    ///
    /// # Cancel safety
    /// Cancel safe: it changes nothing.
    async fn describe_holder(&self, name: &str) -> Result<Option<Holder>, LockError> {
        note::describe(&self.inner, name).await
    }

    /// One `Txn`: if the lock key holds the lease's token, put the note key (the grant's
    /// `dl:` value, a newline, `note`) on the etcd lease the lock key is on, so the note lasts
    /// exactly as long as the grant (released: revoked; expired: gone with the key) and a
    /// renewal needs no write. Replaces this grant's earlier note. `Ok(false)` for a lease
    /// that is no longer ours (nothing written), or of a kind other than the mutex and the
    /// fair lock (as on lock-redis).
    ///
    /// # Errors
    /// [`LockError::InvalidInput`] for a note over [`MAX_NOTE_BYTES`](crate::MAX_NOTE_BYTES)
    /// (nothing sent); [`LockError::Timeout`] / [`LockError::Backend`] when etcd fails.
    ///
    /// # Cancel safety
    /// Cancel safe: dropped, the note is written or not.
    async fn annotate(&self, lease: &Lease, note: &[u8]) -> Result<bool, LockError> {
        note::annotate(&self.inner, lease, note).await
    }

    async fn ping(&self) -> Result<(), LockError> {
        let client = self.client().await?;
        let mut kv = client.kv_client();
        let options = GetOptions::new().with_count_only();
        bounded(
            Op::Connect,
            TimeoutPhase::Command,
            self.inner.command_timeout(),
            kv.get(self.key(""), Some(options)),
        )
        .await
        .map(drop)
    }

    fn capabilities(&self) -> Capabilities {
        CAPABILITIES
    }

    /// The operator reads of this lock's prefix (`inspect/`).
    fn inspector(&self) -> Option<&dyn Inspect> {
        Some(self)
    }
}
