//! [`SlowLock`]: a lock whose acquires reach the backend late and are answered late, for the
//! lost-answer check where no network sits between the backend and its store (an in-process
//! `MemoryLock`, a Redlock's nodes) or where a proxy cannot stand in it (a Redis Cluster's
//! clients follow redirections to the nodes' own addresses).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use lock_core::backend::{
    Attempt, Capabilities, Handover, Holder, Lock, LossWatch, MultiAttempt, OnLoss, ReleaseWatch,
};
use lock_core::{Kind, Lease, LockError, Token};
use tokio::time::Instant;

/// `inner`, whose grants (every `try_acquire*`) are sent `latency` late and answered
/// `latency` after the inner lock answered, like a network with that one-way delay between a
/// client and its store: a caller that gives up in the second half leaves a grant the store
/// applied and nobody received. Every other operation is forwarded at once.
///
/// Below a backend (a Redlock's nodes) this is what a slow network does. Around a whole
/// backend it is weaker: the backend's own bookkeeping after the answer (a cache of versions,
/// a registration) has run before the answer is lost, where a real network would have lost it
/// first. The runners that use it that way say why no proxy or store wrapper fits.
pub struct SlowLock {
    inner: Arc<dyn Lock>,
    latency: Duration,
}

impl fmt::Debug for SlowLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SlowLock")
            .field("backend", &self.inner.backend())
            .field("latency", &self.latency)
            .finish_non_exhaustive()
    }
}

impl SlowLock {
    /// `inner` with grants delayed by `latency` each way.
    pub fn new(inner: Arc<dyn Lock>, latency: Duration) -> Self {
        Self { inner, latency }
    }

    /// Sends `grant` `latency` late and returns its answer `latency` after it came.
    async fn slowly<T>(&self, grant: impl Future<Output = T>) -> T {
        tokio::time::sleep(self.latency).await;
        let answer = grant.await;
        tokio::time::sleep(self.latency).await;
        answer
    }
}

#[async_trait]
impl Lock for SlowLock {
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
        self.slowly(self.inner.try_acquire(name, token, ttl)).await
    }
    async fn try_acquire_renewed(
        &self,
        name: &str,
        token: Token,
        ttl: Duration,
    ) -> Result<Attempt, LockError> {
        self.slowly(self.inner.try_acquire_renewed(name, token, ttl))
            .await
    }
    async fn try_acquire_kind(
        &self,
        name: &str,
        kind: Kind,
        token: Token,
        ttl: Duration,
    ) -> Result<Attempt, LockError> {
        self.slowly(self.inner.try_acquire_kind(name, kind, token, ttl))
            .await
    }
    async fn try_acquire_all(
        &self,
        names: &[Arc<str>],
        token: Token,
        ttl: Duration,
    ) -> Result<MultiAttempt, LockError> {
        self.slowly(self.inner.try_acquire_all(names, token, ttl))
            .await
    }
    async fn permits_in_use(&self, name: &str) -> Result<u32, LockError> {
        self.inner.permits_in_use(name).await
    }
    async fn extend(&self, lease: &Lease, ttl: Duration) -> Result<Option<Instant>, LockError> {
        self.inner.extend(lease, ttl).await
    }
    async fn extend_many(
        &self,
        leases: &[(Lease, Duration)],
    ) -> Vec<Result<Option<Instant>, LockError>> {
        self.inner.extend_many(leases).await
    }
    async fn release(&self, lease: &Lease) -> Result<bool, LockError> {
        self.inner.release(lease).await
    }
    async fn hand_over(
        &self,
        lease: &Lease,
        to: Token,
        ttl: Duration,
    ) -> Result<Handover, LockError> {
        self.inner.hand_over(lease, to, ttl).await
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
    fn watch_loss(&self, lease: &Lease, on_loss: OnLoss) -> Option<LossWatch> {
        self.inner.watch_loss(lease, on_loss)
    }
    async fn describe_holder(&self, name: &str) -> Result<Option<Holder>, LockError> {
        self.inner.describe_holder(name).await
    }
    async fn annotate(&self, lease: &Lease, note: &[u8]) -> Result<bool, LockError> {
        self.inner.annotate(lease, note).await
    }
    async fn ping(&self) -> Result<(), LockError> {
        self.inner.ping().await
    }
}
