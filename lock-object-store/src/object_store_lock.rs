//! `ObjectStoreLock`: the lock, and its [`Lock`] implementation.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use lock_core::backend::{Attempt, Capabilities, Fencing, Handover, Holder, Lock, TokenScale};
use lock_core::{Lease, LockError, Op, Token};
use object_store::ObjectStore;
use object_store::path::Path;
use tokio::sync::OnceCell;
use tokio::time::Instant;

use crate::error::BACKEND;
use crate::held::Held;
use crate::observe::Observations;
use crate::shared::Shared;
use crate::store::Objects;
use crate::{grant, rewrite};

/// A distributed lock on an object store: one object per name under a prefix, granted by
/// conditional writes (create when absent, update on the version read), expiring when a
/// contender has seen the same version for a whole lease on its own monotonic clock.
///
/// What it offers ([`Lock::capabilities`]): the mutex, the multi-lock one name after the other,
/// strictly increasing fencing tokens (the object's epoch, kept across releases), renewal, and
/// holder notes (`describe_holder`, `annotate`). Read-write locks, semaphores and fair locks
/// are refused with [`LockError::Unsupported`]; releases are not announced (waiters poll with
/// the `Locker`'s jittered backoff). A takeover after a holder died costs at least one lease
/// (the crate's README, "Expiry").
///
/// Cheap to clone: clones share the store, the observations and the probe's answer.
#[derive(Clone)]
pub struct ObjectStoreLock {
    shared: Arc<Shared>,
}

impl ObjectStoreLock {
    /// A lock on `store`, its objects under `prefix` (`"locks"`: the lock `job` is the
    /// object `locks/job`; `""` for the top of the store), each request bounded by
    /// `timeout`. Use [`ObjectStoreLock::builder`] for an `s3://` URL.
    #[must_use]
    pub fn new(store: Arc<dyn ObjectStore>, prefix: &str, timeout: Duration) -> Self {
        let label: Arc<str> = store.to_string().into();
        Self {
            shared: Arc::new(Shared {
                objects: Objects {
                    store,
                    prefix: Path::from(prefix),
                    timeout,
                    label,
                },
                observations: Observations::default(),
                held: Held::default(),
                probed: OnceCell::new(),
            }),
        }
    }

    /// The store this lock writes to.
    #[must_use]
    pub fn store(&self) -> &Arc<dyn ObjectStore> {
        &self.shared.objects.store
    }

    /// The object path of lock `name` (`{prefix}/{name}`, the name one percent-encoded path
    /// segment).
    #[must_use]
    pub fn object_path(&self, name: &str) -> Path {
        self.shared.objects.key(name)
    }

    /// What the clones share (for the tools' reads in `inspect.rs`).
    pub(crate) fn shared(&self) -> &Shared {
        &self.shared
    }

    /// Runs the self-probe now rather than at the first grant.
    ///
    /// # Errors
    /// [`LockError::Unsupported`] (naming the store) when the store accepted a stale
    /// conditional write; timeouts and store errors.
    ///
    /// # Cancel safety
    /// Cancel safe: a probe object left behind is harmless and never reused.
    pub async fn check_store(&self) -> Result<(), LockError> {
        self.shared.probe().await
    }
}

impl fmt::Debug for ObjectStoreLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ObjectStoreLock")
            .field("store", &self.shared.objects.label)
            .field("prefix", &self.shared.objects.prefix)
            .field("timeout", &self.shared.objects.timeout)
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl Lock for ObjectStoreLock {
    fn backend(&self) -> &'static str {
        BACKEND
    }

    async fn try_acquire(
        &self,
        name: &str,
        token: Token,
        ttl: Duration,
    ) -> Result<Attempt, LockError> {
        grant::try_acquire(&self.shared, name, token, ttl).await
    }

    async fn extend(&self, lease: &Lease, ttl: Duration) -> Result<Option<Instant>, LockError> {
        rewrite::extend(&self.shared, lease, ttl).await
    }

    async fn release(&self, lease: &Lease) -> Result<bool, LockError> {
        rewrite::release(&self.shared, lease).await
    }

    async fn hand_over(
        &self,
        lease: &Lease,
        to: Token,
        ttl: Duration,
    ) -> Result<Handover, LockError> {
        rewrite::hand_over(&self.shared, lease, to, ttl).await
    }

    async fn describe_holder(&self, name: &str) -> Result<Option<Holder>, LockError> {
        let key = self.shared.objects.key(name);
        let Some(cur) = self.shared.objects.read(Op::Read, &key).await? else {
            return Ok(None);
        };
        if cur.body.holder.is_none() {
            return Ok(None);
        }
        // The holder's remaining lease as this lock can vouch for it: the lease less how long
        // this very version has been seen unchanged; seen for a whole lease, it is gone.
        let lease = cur.body.lease();
        let seen = self
            .shared
            .observations
            .saw(key.as_ref(), &cur.version, lease, cur.received);
        if seen >= lease + self.shared.drift(lease) {
            return Ok(None);
        }
        let holder = Holder::new(cur.body.epoch, Some(lease.saturating_sub(seen)));
        Ok(Some(match cur.body.note_bytes() {
            Some(note) => holder.with_note(note),
            None => holder,
        }))
    }

    async fn annotate(&self, lease: &Lease, note: &[u8]) -> Result<bool, LockError> {
        rewrite::annotate(&self.shared, lease, note).await
    }

    async fn ping(&self) -> Result<(), LockError> {
        self.shared.probe().await
    }

    fn inspector(&self) -> Option<&dyn lock_core::backend::Inspect> {
        Some(self)
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::MUTEX
            .with_fencing(Fencing::Strict(TokenScale::Counter))
            .with_announcements(false)
            .with_holders(true)
            // `lock_object_store::fenced_put`: the token in the object's metadata.
            .with_guarded_writes(true)
    }
}
