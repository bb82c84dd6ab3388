//! [`EtcdLock`]: the type and the `impl Lock` that picks the kind (the requests are the
//! executor's, the kinds its methods).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use etcd_client::{Client, Compare, CompareOp, GetOptions, Txn, TxnOp};
use futures::future::join_all;
use lock_core::backend::{
    Attempt, Capabilities, Fencing, Handover, Holder, Lock, MultiAttempt, MultiLock, ReleaseWatch,
    TokenScale,
};
use lock_core::{Kind, Lease, LockError, Op, TimeoutPhase, Token, valid_until};
use tokio::time::Instant;

use crate::error::{BACKEND, bounded};
use crate::executor::{Executor, put_on_value, read, revision};
use crate::kinds::{fair, note, read_write, semaphore};
use crate::layout::{self, lease_id};

/// What this backend offers: every kind (mutex, read-write, semaphore, fair), the multi-lock in one transaction, fencing tokens
/// that are etcd revisions (one counter for the whole cluster, kept through restarts and
/// leader changes), releases announced through a watch, and holder descriptions (a note
/// beside the grant, on its lease; `kinds/note.rs`).
const CAPABILITIES: Capabilities = Capabilities::MUTEX
    .with_semaphore()
    .with_fair()
    .with_read_write()
    .with_multi(MultiLock::Atomic)
    .with_fencing(Fencing::Strict(TokenScale::Counter))
    .with_announcements(true)
    .with_holders(true);

/// A lock backend on etcd: a grant is a committed Raft entry, so it survives the loss of any
/// minority of members, restarts and leader changes, and the fencing token is the revision of
/// the transaction that wrote the grant.
///
/// - `try_acquire`: a lease of the holder's own (its id derived from the token), then one
///   transaction: if the key's `create_revision` is 0 (absent), put the token on that lease,
///   else read the holder. Granted: the fencing token is the put's revision. Busy: the
///   holder's remaining lease TTL, and whether it announces (a distlock value).
/// - `extend`: a keep-alive of the lease, and a check that the key still holds the token.
/// - `release`: one transaction (if the value is the token, delete the key), then the lease
///   is revoked in the background.
/// - `hand_over`: a lease for the new token, then one transaction (if the value is the old
///   token, put the new one on the new lease): a new revision, so a new fencing token.
/// - `try_acquire_all`: every name's lease, then one transaction over every key.
/// - the semaphore (`try_acquire_kind`): a key per holder, granted by its rank in creation
///   revision order (the crate README, "The semaphore").
/// - the read-write lock (`try_acquire_kind`): the writer is the lock key, each reader a key of
///   its own (the crate README, "The read-write lock").
/// - the fair lock (`try_acquire_kind`): a queue entry per waiter, the head by creation
///   revision (the crate README, "The fair lock").
/// - `watch`: one watch per runtime on the key prefix (deletions only).
/// - `annotate`: one transaction (if the key holds the token, put the note key on the grant's
///   lease); `describe_holder`: one transaction reading the key and the note key, then the
///   lease's TTL (the crate README, "Holder descriptions").
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

    /// The key and the value a lease holds, by its kind.
    fn held(&self, lease: &Lease) -> (Vec<u8>, Vec<u8>) {
        match lease.kind() {
            Kind::Semaphore { permits, max } => (
                layout::holder_key(self.prefix(), lease.name(), lease.token()),
                layout::holder_value(lease.token(), permits, max),
            ),
            Kind::Read { .. } => (
                layout::reader_key(self.prefix(), lease.name(), lease.token()),
                layout::value(lease.token()),
            ),
            _ => (self.key(lease.name()), layout::value(lease.token())),
        }
    }
}

fn put_on(key: Vec<u8>, token: &Token, lease: i64) -> TxnOp {
    put_on_value(key, layout::value(token), lease)
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
        let started = Instant::now();
        let client = self.client().await?;
        let (key, id) = (self.key(name), lease_id(&token, name));
        self.inner.grant(&client, Op::Acquire, id, ttl).await?;
        let txn = Txn::new()
            .when([Compare::create_revision(key.clone(), CompareOp::Equal, 0)])
            .and_then([put_on(key.clone(), &token, id)])
            .or_else([TxnOp::get(key, None)]);
        let answer = self.inner.txn(&client, Op::Acquire, txn).await?;
        if answer.succeeded() {
            let fencing = revision(Op::Acquire, &answer)?;
            return Ok(Attempt::Acquired(Lease::new(
                name,
                token,
                fencing,
                valid_until(started, ttl),
            )));
        }
        self.inner.revoke_later(&client, id);
        Ok(self
            .inner
            .busy(&client, read(&answer, 0).as_ref(), false)
            .await)
    }

    async fn try_acquire_kind(
        &self,
        name: &str,
        kind: Kind,
        token: Token,
        ttl: Duration,
    ) -> Result<Attempt, LockError> {
        layout::check_name(name)?;
        match kind {
            Kind::Mutex => self.try_acquire(name, token, ttl).await,
            Kind::Semaphore { permits, max } => {
                semaphore::try_acquire(&self.inner, name, (permits, max), token, ttl).await
            }
            Kind::Fair { queued } => fair::try_acquire(&self.inner, name, queued, token, ttl).await,
            Kind::Read { writer_preference } => {
                read_write::try_read(&self.inner, name, writer_preference, token, ttl).await
            }
            Kind::Write { writer_preference } => {
                read_write::try_write(&self.inner, name, writer_preference, token, ttl).await
            }
            other => Err(LockError::Unsupported {
                backend: BACKEND,
                kind: other.label(),
            }),
        }
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
        let started = Instant::now();
        let client = self.client().await?;
        let ids: Vec<i64> = names.iter().map(|n| lease_id(&token, n)).collect();
        let granted = join_all(
            ids.iter()
                .map(|id| self.inner.grant(&client, Op::Acquire, *id, ttl)),
        )
        .await;
        if let Some(Err(err)) = granted.into_iter().find(Result::is_err) {
            for id in &ids {
                self.inner.revoke_later(&client, *id);
            }
            return Err(err);
        }
        let keys: Vec<Vec<u8>> = names.iter().map(|n| self.key(n)).collect();
        let txn = Txn::new()
            .when(
                keys.iter()
                    .map(|k| Compare::create_revision(k.clone(), CompareOp::Equal, 0))
                    .collect::<Vec<_>>(),
            )
            .and_then(
                keys.iter()
                    .zip(&ids)
                    .map(|(k, id)| put_on(k.clone(), &token, *id))
                    .collect::<Vec<_>>(),
            )
            .or_else(
                keys.iter()
                    .map(|k| TxnOp::get(k.clone(), Some(GetOptions::new())))
                    .collect::<Vec<_>>(),
            );
        let answer = self.inner.txn(&client, Op::Acquire, txn).await?;
        if answer.succeeded() {
            let fencing = revision(Op::Acquire, &answer)?;
            let until = valid_until(started, ttl);
            return Ok(MultiAttempt::Acquired(
                names
                    .iter()
                    .map(|n| Lease::new(Arc::clone(n), token, fencing, until))
                    .collect(),
            ));
        }
        for id in &ids {
            self.inner.revoke_later(&client, *id);
        }
        let index = (0..names.len())
            .find(|i| read(&answer, *i).is_some())
            .unwrap_or(0);
        let (holder_ttl, announces) = self
            .inner
            .holder_state(&client, read(&answer, index).as_ref())
            .await;
        Ok(MultiAttempt::Busy {
            index,
            holder_ttl,
            announces,
        })
    }

    async fn extend(&self, lease: &Lease, ttl: Duration) -> Result<Option<Instant>, LockError> {
        let started = Instant::now();
        let client = self.client().await?;
        let (key, stored) = self.held(lease);
        let id = lease_id(lease.token(), lease.name());
        let ours = Txn::new().when([Compare::value(key, CompareOp::Equal, stored)]);
        let mut leases = client.lease_client();
        let (ours, kept, granted) = tokio::join!(
            self.inner.txn(&client, Op::Extend, ours),
            bounded(
                Op::Extend,
                TimeoutPhase::Command,
                self.inner.command_timeout(),
                async {
                    match leases.keep_alive(id).await {
                        Ok((_keeper, mut stream)) => {
                            // `keep_alive` has read the first answer; the stream is dropped here.
                            drop(stream.message());
                            Ok(true)
                        }
                        Err(etcd_client::Error::LeaseKeepAliveError(_)) => Ok(false),
                        Err(err) => Err(err),
                    }
                }
            ),
            granted_ttl(&client, id, self.inner.command_timeout()),
        );
        if !(ours?.succeeded() && kept?) {
            return Ok(None);
        }
        // A keep-alive restores the TTL the lease was granted with; a longer one asked now is
        // capped at it (see the README), so the validity never outlasts the key.
        Ok(Some(valid_until(
            started,
            granted.map_or(ttl, |g| ttl.min(g)),
        )))
    }

    async fn release(&self, lease: &Lease) -> Result<bool, LockError> {
        let client = self.client().await?;
        let (key, stored) = self.held(lease);
        let mut txn = Txn::new()
            .when([Compare::value(key.clone(), CompareOp::Equal, stored)])
            .and_then([TxnOp::delete(key, None)]);
        if let Kind::Fair { .. } = lease.kind() {
            // A fair waiter's entry goes with its token, granted or not.
            let entry = layout::entry_key(self.prefix(), lease.name(), lease.token());
            self.inner
                .revoke_later(&client, layout::entry_lease(lease.token(), lease.name()));
            let (lock_key, _) = self.held(lease);
            txn = Txn::new()
                .when([Compare::value(
                    lock_key.clone(),
                    CompareOp::Equal,
                    layout::value(lease.token()),
                )])
                .and_then([
                    TxnOp::delete(lock_key, None),
                    TxnOp::delete(entry.clone(), None),
                ])
                .or_else([TxnOp::delete(entry, None)]);
        }
        if let Kind::Write {
            writer_preference: true,
        } = lease.kind()
        {
            // A waiting writer's record goes with its token, granted or not.
            let record = layout::waiting_key(self.prefix(), lease.name(), lease.token());
            self.inner
                .revoke_later(&client, layout::waiting_lease(lease.token(), lease.name()));
            let (lock_key, stored) = self.held(lease);
            txn = Txn::new()
                .when([Compare::value(lock_key.clone(), CompareOp::Equal, stored)])
                .and_then([
                    TxnOp::delete(lock_key, None),
                    TxnOp::delete(record.clone(), None),
                ])
                .or_else([TxnOp::delete(record, None)]);
        }
        let answer = self.inner.txn(&client, Op::Release, txn).await?;
        self.inner
            .revoke_later(&client, lease_id(lease.token(), lease.name()));
        Ok(answer.succeeded())
    }

    async fn hand_over(
        &self,
        lease: &Lease,
        to: Token,
        ttl: Duration,
    ) -> Result<Handover, LockError> {
        let started = Instant::now();
        let client = self.client().await?;
        let key = self.key(lease.name());
        let id = lease_id(&to, lease.name());
        self.inner.grant(&client, Op::Acquire, id, ttl).await?;
        let txn = Txn::new()
            .when([Compare::value(
                key.clone(),
                CompareOp::Equal,
                layout::value(lease.token()),
            )])
            .and_then([put_on(key, &to, id)]);
        let answer = self.inner.txn(&client, Op::Acquire, txn).await?;
        if !answer.succeeded() {
            self.inner.revoke_later(&client, id);
            return Ok(Handover::NotOwned);
        }
        self.inner
            .revoke_later(&client, lease_id(lease.token(), lease.name()));
        let fencing = revision(Op::Acquire, &answer)?;
        Ok(Handover::Handed(Lease::new(
            lease.name(),
            to,
            fencing,
            valid_until(started, ttl),
        )))
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
    /// `LeaseTimeToLive` of the key's lease (a second request: etcd has no lease TTL in a
    /// transaction). The term (`fencing_token`) is the lock key's `mod_revision`, the revision
    /// of the grant or hand-over that wrote the current holder, which is the fencing token that
    /// grant returned; renewals do not change it. A holder written by another client (no `dl:`
    /// value) has term 0 and no note. The TTL is in etcd's whole seconds (rounded down), zero
    /// when the lease ran out between the two requests, `None` for a key without a lease.
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
    /// `dl:` value, a newline, `note`) on the grant's own etcd lease, so the note lasts
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
}

/// The TTL lease `id` was granted with, if etcd says (`None` when it does not answer in time:
/// the caller then trusts the TTL it asked for at the grant, which the lease was given).
async fn granted_ttl(client: &Client, id: i64, timeout: Duration) -> Option<Duration> {
    let mut leases = client.lease_client();
    match tokio::time::timeout(timeout, leases.time_to_live(id, None)).await {
        Ok(Ok(answer)) if answer.granted_ttl() > 0 => Some(Duration::from_secs(
            u64::try_from(answer.granted_ttl()).ok()?,
        )),
        _ => None,
    }
}
