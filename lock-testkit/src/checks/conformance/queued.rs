//! A lock wrapper that tells a check when a waiter has its place in the store: its first busy
//! answer, after which the order of waiters (fair) or a waiting writer's precedence (writer
//! preference) is the store's to keep, however slow the machine was to get there.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use lock_core::backend::{Attempt, Capabilities, Lock, ReleaseWatch};
use lock_core::{Kind, Lease, LockError, Locker, LockerBuilder, Token};
use tokio::sync::Notify;
use tokio::time::Instant;

use super::Backend;

/// The backend's lock, telling `queued` when an attempt of a kind that leaves a waiter's record
/// (a queued fair waiter, a writer with writer preference) is answered busy: the waiter has
/// its place.
pub(super) struct QueueWatched {
    inner: Arc<dyn Lock>,
    queued: Arc<Notify>,
}

impl QueueWatched {
    /// A locker of its own on the backend's store whose waiting attempts tell `queued`.
    pub(super) fn locker(backend: &Backend, queued: Arc<Notify>) -> Locker {
        let inner = Arc::clone(backend.locker().backend_lock());
        LockerBuilder::from_arc(Arc::new(Self { inner, queued })).build()
    }
}

#[async_trait]
impl Lock for QueueWatched {
    fn backend(&self) -> &'static str {
        self.inner.backend()
    }
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }
    async fn try_acquire(
        &self,
        name: &str,
        token: Token,
        ttl: Duration,
    ) -> Result<Attempt, LockError> {
        self.inner.try_acquire(name, token, ttl).await
    }
    async fn try_acquire_kind(
        &self,
        name: &str,
        kind: Kind,
        token: Token,
        ttl: Duration,
    ) -> Result<Attempt, LockError> {
        let attempt = self.inner.try_acquire_kind(name, kind, token, ttl).await;
        if kind.records_waiter() && matches!(attempt, Ok(Attempt::Busy { .. })) {
            // `notify_one` keeps a permit when nobody waits yet, so no answer is missed.
            self.queued.notify_one();
        }
        attempt
    }
    async fn extend(&self, lease: &Lease, ttl: Duration) -> Result<Option<Instant>, LockError> {
        self.inner.extend(lease, ttl).await
    }
    async fn release(&self, lease: &Lease) -> Result<bool, LockError> {
        self.inner.release(lease).await
    }
    async fn watch(&self, name: &str) -> Result<Option<ReleaseWatch>, LockError> {
        self.inner.watch(name).await
    }
    async fn watch_turn(
        &self,
        name: &str,
        token: &Token,
    ) -> Result<Option<ReleaseWatch>, LockError> {
        self.inner.watch_turn(name, token).await
    }
}
