//! One `Lock` wrapper for the scenarios that count what a backend was asked and answered:
//! S4's busy answers per Redlock node (`stale.rs`) and S5/S9/P5's renewal batches
//! (`renewal.rs`). Every method forwards, so a client over it behaves as over the plain lock.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use lock_core::backend::{Attempt, Handover, Lock, MultiAttempt, ReleaseWatch};
use lock_core::{Kind, Lease, LockError, Token};

/// A `Lock` that forwards everything to `inner`, counting busy answers to acquisitions and
/// the renewal batches (`extend_many` calls) and the leases in them.
pub(crate) struct Counted {
    inner: Arc<dyn Lock>,
    busy: AtomicU64,
    batches: AtomicU64,
    renewals: AtomicU64,
}

impl Counted {
    pub(crate) fn new(inner: Arc<dyn Lock>) -> Self {
        Self {
            inner,
            busy: AtomicU64::new(0),
            batches: AtomicU64::new(0),
            renewals: AtomicU64::new(0),
        }
    }

    /// Busy answers to acquisitions so far.
    pub(crate) fn busy(&self) -> u64 {
        self.busy.load(Ordering::Acquire)
    }

    /// Renewal batches and the leases they renewed, so far.
    pub(crate) fn renewals(&self) -> (u64, u64) {
        (
            self.batches.load(Ordering::Acquire),
            self.renewals.load(Ordering::Acquire),
        )
    }

    fn count(&self, attempt: Result<Attempt, LockError>) -> Result<Attempt, LockError> {
        if let Ok(Attempt::Busy { .. }) = &attempt {
            self.busy.fetch_add(1, Ordering::AcqRel);
        }
        attempt
    }
}

#[async_trait]
impl Lock for Counted {
    fn backend(&self) -> &'static str {
        self.inner.backend()
    }

    async fn try_acquire(
        &self,
        name: &str,
        token: Token,
        ttl: Duration,
    ) -> Result<Attempt, LockError> {
        self.count(self.inner.try_acquire(name, token, ttl).await)
    }

    async fn try_acquire_renewed(
        &self,
        name: &str,
        token: Token,
        ttl: Duration,
    ) -> Result<Attempt, LockError> {
        self.count(self.inner.try_acquire_renewed(name, token, ttl).await)
    }

    async fn try_acquire_kind(
        &self,
        name: &str,
        kind: Kind,
        token: Token,
        ttl: Duration,
    ) -> Result<Attempt, LockError> {
        self.count(self.inner.try_acquire_kind(name, kind, token, ttl).await)
    }

    async fn permits_in_use(&self, name: &str) -> Result<u32, LockError> {
        self.inner.permits_in_use(name).await
    }

    async fn try_acquire_all(
        &self,
        names: &[Arc<str>],
        token: Token,
        ttl: Duration,
    ) -> Result<MultiAttempt, LockError> {
        self.inner.try_acquire_all(names, token, ttl).await
    }

    async fn extend(
        &self,
        lease: &Lease,
        ttl: Duration,
    ) -> Result<Option<tokio::time::Instant>, LockError> {
        self.inner.extend(lease, ttl).await
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

    async fn extend_many(
        &self,
        leases: &[(Lease, Duration)],
    ) -> Vec<Result<Option<tokio::time::Instant>, LockError>> {
        self.batches.fetch_add(1, Ordering::AcqRel);
        self.renewals
            .fetch_add(leases.len() as u64, Ordering::AcqRel);
        self.inner.extend_many(leases).await
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

    async fn ping(&self) -> Result<(), LockError> {
        self.inner.ping().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lock_core::MemoryLock;

    #[tokio::test]
    async fn counts_the_busy_answers_a_node_gives() {
        let node = Counted::new(Arc::new(MemoryLock::new()));
        let ttl = Duration::from_secs(30);
        let token = || Token::generate().expect("randomness");
        let first = node.try_acquire("n", token(), ttl).await.expect("answer");
        assert!(matches!(first, Attempt::Acquired(_)));
        assert_eq!(node.busy(), 0);
        let again = node.try_acquire("n", token(), ttl).await.expect("answer");
        assert!(matches!(again, Attempt::Busy { .. }));
        let other_kind = node
            .try_acquire_kind("n", Kind::Mutex, token(), ttl)
            .await
            .expect("answer");
        assert!(matches!(other_kind, Attempt::Busy { .. }));
        assert_eq!(node.busy(), 2);
    }
}
