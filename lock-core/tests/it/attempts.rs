//! One attempt's bookkeeping in the Locker: which grant a backend is asked for (renewed or of a
//! fixed TTL), and what is cleaned up after a failed attempt — the attempted token released
//! when the failure may have applied (a timeout after the store took the grant), nothing sent
//! when the store is known to have applied nothing (a quorum not reached), and nothing sent for
//! a busy mutex's attempts (only the kinds that queue keep their waiter's token).

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use lock_core::backend::{Attempt, Capabilities, Lock, MultiAttempt};
use lock_core::{Lease, LockError, Locker, MemoryLock, Op, TimeoutPhase, Token};
use tokio::time::Instant;

/// How the next acquires fail.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Failure {
    None,
    /// The store took the grant, then the answer was lost (a command timeout).
    AppliedThenTimedOut,
    /// Known to have applied nothing: a quorum not reached (worth trying again).
    NothingApplied,
    /// A wrong password: trying again will not help.
    Refused,
}

/// MemoryLock, counting the acquire calls by kind and the releases, failing acquires as told.
struct Failing {
    inner: MemoryLock,
    failure: Mutex<Failure>,
    plain: AtomicU32,
    renewed: AtomicU32,
    releases: AtomicU32,
}

impl Failing {
    fn new() -> Arc<Self> {
        Arc::new(Self {
            inner: MemoryLock::new(),
            failure: Mutex::new(Failure::None),
            plain: AtomicU32::new(0),
            renewed: AtomicU32::new(0),
            releases: AtomicU32::new(0),
        })
    }

    fn fail(&self, failure: Failure) {
        *self.failure.lock().expect("lock") = failure;
    }

    fn failure(&self) -> Failure {
        *self.failure.lock().expect("lock")
    }

    /// The error of a failed acquire; `None` when acquires succeed.
    fn error(&self) -> Option<LockError> {
        match self.failure() {
            Failure::None => None,
            Failure::AppliedThenTimedOut => Some(LockError::Timeout {
                phase: TimeoutPhase::Command,
                elapsed: Duration::from_millis(500),
            }),
            Failure::NothingApplied => Some(LockError::QuorumNotReached {
                backend: "failing",
                op: Op::Acquire,
                granted: 1,
                required: 2,
                retryable: true,
                source: "1 of 3 nodes".into(),
            }),
            Failure::Refused => Some(LockError::Backend {
                backend: "failing",
                op: Op::Acquire,
                retryable: false,
                source: "WRONGPASS".into(),
            }),
        }
    }

    fn count(&self, counter: &AtomicU32) -> u32 {
        counter.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl Lock for Failing {
    fn backend(&self) -> &'static str {
        "failing"
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
        self.plain.fetch_add(1, Ordering::SeqCst);
        if self.failure() == Failure::AppliedThenTimedOut {
            self.inner.try_acquire(name, token, ttl).await?;
        }
        match self.error() {
            Some(error) => Err(error),
            None => self.inner.try_acquire(name, token, ttl).await,
        }
    }
    async fn try_acquire_renewed(
        &self,
        name: &str,
        token: Token,
        ttl: Duration,
    ) -> Result<Attempt, LockError> {
        self.renewed.fetch_add(1, Ordering::SeqCst);
        self.inner.try_acquire(name, token, ttl).await
    }
    async fn try_acquire_all(
        &self,
        names: &[Arc<str>],
        token: Token,
        ttl: Duration,
    ) -> Result<MultiAttempt, LockError> {
        if self.failure() == Failure::AppliedThenTimedOut {
            self.inner.try_acquire_all(names, token, ttl).await?;
        }
        match self.error() {
            Some(error) => Err(error),
            None => self.inner.try_acquire_all(names, token, ttl).await,
        }
    }
    async fn extend(&self, lease: &Lease, ttl: Duration) -> Result<Option<Instant>, LockError> {
        self.inner.extend(lease, ttl).await
    }
    async fn release(&self, lease: &Lease) -> Result<bool, LockError> {
        self.releases.fetch_add(1, Ordering::SeqCst);
        self.inner.release(lease).await
    }
}

/// A renewed request asks the backend for a renewed grant, a fixed one for a plain grant (etcd
/// puts them on different leases).
#[tokio::test(start_paused = true)]
async fn a_renewed_request_asks_for_a_renewed_grant_and_a_fixed_one_for_a_plain_grant() {
    let store = Failing::new();
    let locker = Locker::new(Arc::clone(&store));
    let renewed = locker.lock("renewed").await.expect("free");
    assert_eq!(
        (store.count(&store.renewed), store.count(&store.plain)),
        (1, 0)
    );
    let fixed = locker
        .lock("fixed")
        .fixed_ttl(Duration::from_secs(5))
        .await
        .expect("free");
    assert_eq!(
        (store.count(&store.renewed), store.count(&store.plain)),
        (1, 1)
    );
    renewed.release().await.expect("ours");
    fixed.release().await.expect("ours");
}

/// An attempt whose answer was lost after the store took the grant is undone (its token
/// released), for one name and for a multi-lock; an attempt the store is known to have refused
/// sends nothing more.
#[tokio::test(start_paused = true)]
async fn a_failed_attempt_is_released_only_when_it_may_have_applied() {
    let store = Failing::new();
    let locker = Locker::new(Arc::clone(&store));
    let fixed = Duration::from_secs(30);

    store.fail(Failure::AppliedThenTimedOut);
    let lost = locker.lock("one").fixed_ttl(fixed).try_acquire().await;
    assert!(matches!(lost, Err(LockError::Timeout { .. })), "{lost:?}");
    let lost = locker
        .lock_all(["a", "b"])
        .fixed_ttl(fixed)
        .try_acquire()
        .await;
    assert!(matches!(lost, Err(LockError::Timeout { .. })), "{lost:?}");
    tokio::time::sleep(Duration::from_millis(10)).await;
    store.fail(Failure::None);
    for name in ["one", "a", "b"] {
        assert!(
            locker
                .lock(name)
                .try_acquire()
                .await
                .expect("answers")
                .is_some(),
            "{name:?} was left held by an attempt whose answer was lost"
        );
    }

    // The guards dropped above release in the background.
    tokio::time::sleep(Duration::from_millis(10)).await;
    let releases = store.count(&store.releases);
    store.fail(Failure::NothingApplied);
    let refused = locker.lock("two").fixed_ttl(fixed).try_acquire().await;
    assert!(
        matches!(refused, Err(LockError::QuorumNotReached { .. })),
        "{refused:?}"
    );
    let refused = locker
        .lock_all(["c", "d"])
        .fixed_ttl(fixed)
        .try_acquire()
        .await;
    assert!(
        matches!(refused, Err(LockError::QuorumNotReached { .. })),
        "{refused:?}"
    );
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(
        store.count(&store.releases),
        releases,
        "a release was sent for attempts that took nothing"
    );
}

/// A mutex request that waits behind a holder and gives up leaves nothing to clean up: no
/// release is sent for its attempts (only the kinds that queue, fair and writer-preferring
/// writes, keep a waiter's record to take back).
#[tokio::test(start_paused = true)]
async fn a_mutex_waiter_that_gives_up_sends_no_release() {
    let store = Failing::new();
    let holder = Locker::new(Arc::clone(&store));
    let waiter = Locker::new(Arc::clone(&store));
    let held = holder.lock("job").await.expect("free");
    let releases = store.count(&store.releases);
    let gave_up = waiter.lock("job").wait(Duration::from_millis(300)).await;
    assert!(
        matches!(gave_up, Err(LockError::Timeout { .. })),
        "{gave_up:?}"
    );
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(store.count(&store.releases), releases);
    held.release().await.expect("ours");
}

/// A multi-lock that waits tries again after an error worth retrying (here until the store
/// answers), and gives up at once on one that is not (a wrong password).
#[tokio::test(start_paused = true)]
async fn a_waiting_multi_lock_retries_what_may_pass_and_not_what_will_not() {
    let store = Failing::new();
    let locker = Locker::new(Arc::clone(&store));
    store.fail(Failure::NothingApplied);
    let healer = {
        let store = Arc::clone(&store);
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            store.fail(Failure::None);
        })
    };
    let all = locker
        .lock_all(["a", "b"])
        .wait(Duration::from_secs(5))
        .await
        .expect("granted once the store answers");
    healer.await.expect("task");
    all.release().await.expect("ours");

    store.fail(Failure::Refused);
    let started = Instant::now();
    let refused = locker
        .lock_all(["a", "b"])
        .wait(Duration::from_secs(5))
        .await;
    assert!(
        matches!(
            refused,
            Err(LockError::Backend {
                retryable: false,
                ..
            })
        ),
        "{refused:?}"
    );
    assert_eq!(started.elapsed(), Duration::ZERO, "not retried");
}
