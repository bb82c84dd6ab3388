//! The check a kind the backend does not offer gets instead of its module's checks: refused
//! with a typed error, before any I/O.

use std::future::Future;
use std::pin::pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use lock_core::backend::{Attempt, Capabilities, Handover, Lock, MultiAttempt, ReleaseWatch};
use lock_core::{Lease, LockError, LockerBuilder, Token};
use tokio::time::Instant;

use super::{Backend, Module, name};

/// The kind of `module` is refused: every request of it that a user can make (a single try, a
/// bounded wait, and for the semaphore `available()`) answers [`LockError::Unsupported`]
/// naming the backend and the kind, and every call that reached the backend answered at its
/// first poll, i.e. before any round trip (the backend's [`Lock`] is wrapped in a probe that
/// polls each call once before awaiting it; a call that needs I/O is pending then). Calls made
/// in the background after the answers (a cleanup) are seen for [`Backend::settle`] too.
///
/// What [`conformance_tests!`](crate::conformance_tests) runs, under each check's name, for a
/// module whose kind the backend's capability table does not declare.
///
/// # Panics
/// When a request is granted or answers anything else, when a call to the backend needed I/O,
/// or for [`Module::Mutex`] and [`Module::Multi`], which every backend offers.
pub async fn refused(backend: &Backend, module: Module, prefix: &str) {
    if module == Module::Guarded {
        // No lock request to refuse: the fence is the store's, not the lock's. The table and
        // the runner agree that there is none (the backend's README says why).
        assert!(
            backend.guarded_writes().is_none(),
            "the backend declares no guarded writes, but its runner gives a fence"
        );
        return;
    }
    let name = name(prefix, "unsupported");
    let probe = Arc::new(Probe {
        inner: Arc::clone(backend.locker().backend_lock()),
        calls: Mutex::default(),
    });
    let locker = LockerBuilder::from_arc(Arc::clone(&probe) as Arc<dyn Lock>).build();
    let wait = backend.settle;
    let answers: Vec<(&str, &str, Result<(), LockError>)> = match module {
        Module::ReadWrite => vec![
            (
                "a read, tried",
                "read",
                locker.read(name.as_str()).try_acquire().await.map(drop),
            ),
            (
                "a read, awaited",
                "read",
                locker.read(name.as_str()).wait(wait).await.map(drop),
            ),
            (
                "a write, tried",
                "write",
                locker.write(name.as_str()).try_acquire().await.map(drop),
            ),
            (
                "a write, awaited",
                "write",
                locker.write(name.as_str()).wait(wait).await.map(drop),
            ),
        ],
        Module::Semaphore => vec![
            (
                "permits, tried",
                "semaphore",
                locker
                    .semaphore(name.as_str(), 2)
                    .try_acquire()
                    .await
                    .map(drop),
            ),
            (
                "permits, awaited",
                "semaphore",
                locker
                    .semaphore(name.as_str(), 2)
                    .wait(wait)
                    .await
                    .map(drop),
            ),
            (
                "the permits available",
                "semaphore",
                locker
                    .semaphore(name.as_str(), 2)
                    .available()
                    .await
                    .map(drop),
            ),
        ],
        Module::Fair => vec![
            (
                "a fair lock, tried",
                "fair",
                locker.fair(name.as_str()).try_acquire().await.map(drop),
            ),
            (
                "a fair lock, awaited",
                "fair",
                locker.fair(name.as_str()).wait(wait).await.map(drop),
            ),
        ],
        Module::Election => {
            let election = locker.elect(name.as_str());
            vec![
                (
                    "a campaign, tried",
                    "election",
                    election.try_campaign().await.map(drop),
                ),
                (
                    "a campaign, awaited",
                    "election",
                    election.campaign().await.map(drop),
                ),
            ]
        }
        Module::LockDelay => {
            let delay = Duration::from_secs(1);
            vec![
                (
                    "a lock-delay, tried",
                    "lock-delayed",
                    locker
                        .lock(name.as_str())
                        .lock_delay(delay)
                        .try_acquire()
                        .await
                        .map(drop),
                ),
                (
                    "a lock-delay, awaited",
                    "lock-delayed",
                    locker
                        .lock(name.as_str())
                        .lock_delay(delay)
                        .wait(wait)
                        .await
                        .map(drop),
                ),
                (
                    "a multi-lock with a lock-delay",
                    "lock-delayed",
                    locker
                        .lock_all([name.as_str()])
                        .lock_delay(delay)
                        .try_acquire()
                        .await
                        .map(drop),
                ),
            ]
        }
        Module::Revocation => vec![
            (
                "a revocation",
                "revocation",
                locker.revoke(&name, Some("why")).await.map(drop),
            ),
            (
                "a revocable request",
                "revocation",
                locker
                    .lock(name.as_str())
                    .revocable()
                    .try_acquire()
                    .await
                    .map(drop),
            ),
        ],
        Module::Latch => {
            let latch = locker.latch(name.as_str(), 2).wait_at_most(wait);
            vec![
                ("a latch's join", "latch", latch.join().await.map(drop)),
                ("a latch's wait", "latch", latch.wait().await.map(drop)),
                ("a latch's count-down", "latch", latch.count_down().await),
            ]
        }
        Module::Barrier => {
            let barrier = locker.barrier(name.as_str(), 2).wait_at_most(wait);
            vec![
                (
                    "a barrier's enter",
                    "barrier",
                    barrier.enter().await.map(drop),
                ),
                (
                    "a barrier's state",
                    "barrier",
                    barrier.state().await.map(drop),
                ),
            ]
        }
        other => panic!("{other:?}: every backend offers it"),
    };
    let label = probe.inner.backend();
    for (what, kind, answer) in answers {
        assert!(
            matches!(
                answer,
                Err(LockError::Unsupported { backend, kind: said }) if backend == label && said == kind
            ),
            "{what} on a backend that does not offer it: {answer:?} (expected Unsupported {{ \
             backend: {label:?}, kind: {kind:?} }})"
        );
    }
    tokio::time::sleep(backend.settle).await; // a cleanup the answers left in the background
    let calls = probe
        .calls
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    assert!(
        calls.iter().all(|(_, at_once)| *at_once),
        "an unsupported kind reached the store: calls (name, answered at once) {calls:?}"
    );
}

/// A backend that forwards every call to `inner`, polling it once before awaiting it, and
/// records whether it answered at that first poll.
struct Probe {
    inner: Arc<dyn Lock>,
    calls: Mutex<Vec<(&'static str, bool)>>,
}

impl Probe {
    async fn see<T>(&self, call: &'static str, future: impl Future<Output = T>) -> T {
        let mut future = pin!(future);
        let first = futures::poll!(future.as_mut());
        let at_once = first.is_ready();
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((call, at_once));
        match first {
            std::task::Poll::Ready(out) => out,
            std::task::Poll::Pending => future.await,
        }
    }
}

#[async_trait]
impl Lock for Probe {
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
        self.see("try_acquire", self.inner.try_acquire(name, token, ttl))
            .await
    }
    async fn try_acquire_kind(
        &self,
        name: &str,
        kind: lock_core::Kind,
        token: Token,
        ttl: Duration,
    ) -> Result<Attempt, LockError> {
        self.see(
            "try_acquire_kind",
            self.inner.try_acquire_kind(name, kind, token, ttl),
        )
        .await
    }
    async fn permits_in_use(&self, name: &str) -> Result<u32, LockError> {
        self.see("permits_in_use", self.inner.permits_in_use(name))
            .await
    }
    async fn try_acquire_all(
        &self,
        names: &[Arc<str>],
        token: Token,
        ttl: Duration,
    ) -> Result<MultiAttempt, LockError> {
        self.see(
            "try_acquire_all",
            self.inner.try_acquire_all(names, token, ttl),
        )
        .await
    }
    async fn extend(&self, lease: &Lease, ttl: Duration) -> Result<Option<Instant>, LockError> {
        self.see("extend", self.inner.extend(lease, ttl)).await
    }
    async fn release(&self, lease: &Lease) -> Result<bool, LockError> {
        self.see("release", self.inner.release(lease)).await
    }
    async fn hand_over(
        &self,
        lease: &Lease,
        to: Token,
        ttl: Duration,
    ) -> Result<Handover, LockError> {
        self.see("hand_over", self.inner.hand_over(lease, to, ttl))
            .await
    }
    async fn extend_many(
        &self,
        leases: &[(Lease, Duration)],
    ) -> Vec<Result<Option<Instant>, LockError>> {
        self.see("extend_many", self.inner.extend_many(leases))
            .await
    }
    async fn watch(&self, name: &str) -> Result<Option<ReleaseWatch>, LockError> {
        self.see("watch", self.inner.watch(name)).await
    }
    async fn watch_turn(
        &self,
        name: &str,
        token: &Token,
    ) -> Result<Option<ReleaseWatch>, LockError> {
        self.see("watch_turn", self.inner.watch_turn(name, token))
            .await
    }
    async fn ping(&self) -> Result<(), LockError> {
        self.see("ping", self.inner.ping()).await
    }
}
