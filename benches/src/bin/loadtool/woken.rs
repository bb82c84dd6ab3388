//! A `Lock` wrapper for the waiters' cost curve (C2) that counts what waiters ask of the
//! store once woken: grant attempts, the busy answers among them (a waiter woken for nothing)
//! and hand-overs (a release that passed the lock straight to a local waiter, which wakes that
//! one waiter and no other). Unlike [`crate::counted::Counted`] it forwards every method a
//! waiting `Locker` may call — loss watches and the capability table too — so the `Locker`
//! over it waits exactly as over the plain lock.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use lock_core::backend::{Attempt, Capabilities, Handover, Lock, LossWatch, OnLoss, ReleaseWatch};
use lock_core::{Kind, Lease, LockError, Token};

/// What waiters asked of the store so far.
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

/// A `Lock` forwarding to `inner`, counting [`Asked`].
pub(crate) struct Woken {
    inner: Arc<dyn Lock>,
    attempts: AtomicU64,
    busy: AtomicU64,
    handovers: AtomicU64,
}

impl Woken {
    pub(crate) fn new(inner: Arc<dyn Lock>) -> Self {
        Self {
            inner,
            attempts: AtomicU64::new(0),
            busy: AtomicU64::new(0),
            handovers: AtomicU64::new(0),
        }
    }

    /// The counts so far.
    pub(crate) fn asked(&self) -> Asked {
        Asked {
            attempts: self.attempts.load(Ordering::Acquire),
            busy: self.busy.load(Ordering::Acquire),
            handovers: self.handovers.load(Ordering::Acquire),
        }
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
impl Lock for Woken {
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
        self.inner.extend_many(leases).await
    }

    async fn watch(&self, name: &str) -> Result<Option<ReleaseWatch>, LockError> {
        self.inner.watch(name).await
    }

    fn watch_loss(&self, lease: &Lease, on_loss: OnLoss) -> Option<LossWatch> {
        self.inner.watch_loss(lease, on_loss)
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

    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }
}
