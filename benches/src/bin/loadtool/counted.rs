//! One `Lock` wrapper for the scenarios that count what a backend was asked and answered:
//! S4's busy answers per Redlock node (`stale.rs`), S5/S9/P5's renewal batches
//! (`renewal.rs`) and C2's grant attempts and hand-overs (`curve_waiters.rs`: what waiters ask
//! of the store once woken). Every method forwards — loss watches and the capability table
//! too — so a `Locker` over it behaves exactly as over the plain lock.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use lock_core::backend::{
    Attempt, Capabilities, Handover, Lock, LossWatch, MultiAttempt, OnLoss, ReleaseWatch,
};
use lock_core::{Kind, Lease, LockError, Token};

/// What was asked of the store so far (C2).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Asked {
    /// Grant attempts (every `try_acquire*`).
    pub(crate) attempts: u64,
    /// Attempts answered busy.
    pub(crate) busy: u64,
    /// Hand-overs to a local waiter.
    pub(crate) handovers: u64,
}

impl Asked {
    /// What was asked between `self` and `later`.
    pub(crate) fn until(self, later: Self) -> Self {
        Self {
            attempts: later.attempts.saturating_sub(self.attempts),
            busy: later.busy.saturating_sub(self.busy),
            handovers: later.handovers.saturating_sub(self.handovers),
        }
    }
}

/// A `Lock` that forwards everything to `inner`, counting grant attempts, busy answers to
/// acquisitions, hand-overs, and the renewal batches (`extend_many` calls) and the leases in
/// them.
pub(crate) struct Counted {
    inner: Arc<dyn Lock>,
    attempts: AtomicU64,
    busy: AtomicU64,
    handovers: AtomicU64,
    batches: AtomicU64,
    renewals: AtomicU64,
}

impl Counted {
    pub(crate) fn new(inner: Arc<dyn Lock>) -> Self {
        Self {
            inner,
            attempts: AtomicU64::new(0),
            busy: AtomicU64::new(0),
            handovers: AtomicU64::new(0),
            batches: AtomicU64::new(0),
            renewals: AtomicU64::new(0),
        }
    }

    /// Grant attempts, busy answers and hand-overs so far.
    pub(crate) fn asked(&self) -> Asked {
        Asked {
            attempts: self.attempts.load(Ordering::Acquire),
            busy: self.busy.load(Ordering::Acquire),
            handovers: self.handovers.load(Ordering::Acquire),
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
        self.attempts.fetch_add(1, Ordering::AcqRel);
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
        self.handovers.fetch_add(1, Ordering::AcqRel);
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

    fn watch_loss(&self, lease: &Lease, on_loss: OnLoss) -> Option<LossWatch> {
        self.inner.watch_loss(lease, on_loss)
    }

    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
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
