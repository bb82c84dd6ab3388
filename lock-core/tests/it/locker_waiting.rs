//! The Locker's policy: validation before I/O, bounded waiting capped by the holder's TTL,
//! cleanup of cancelled or failed attempts, and the guard's release paths. Time is tokio's
//! paused clock, so the durations asserted here are exact, not wall-clock.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use lock_core::backend::{Attempt, Lock};
use lock_core::{
    Backoff, Lease, LockError, Locker, MAX_NAME_LEN, MAX_TTL, MemoryLock, Op, TimeoutPhase, Token,
};
use tokio::time::{Instant, advance, sleep};

const MS: Duration = Duration::from_millis(1);

/// MemoryLock with counters, and optionally a stall after the grant or a failure.
#[derive(Default)]
struct Probe {
    inner: MemoryLock,
    attempts: AtomicU32,
    releases: AtomicU32,
    /// Sleep this long after applying an acquire, before answering (a slow reply).
    stall: Option<Duration>,
    /// Apply the acquire, then answer with a timeout error (the reply was lost).
    lose_reply: bool,
}

#[async_trait]
impl Lock for Probe {
    fn backend(&self) -> &'static str {
        "probe"
    }
    async fn try_acquire(
        &self,
        name: &str,
        token: Token,
        ttl: Duration,
    ) -> Result<Attempt, LockError> {
        self.attempts.fetch_add(1, Ordering::SeqCst);
        let answer = self.inner.try_acquire(name, token, ttl).await?;
        if let Some(stall) = self.stall {
            sleep(stall).await;
        }
        if self.lose_reply {
            return Err(LockError::Timeout {
                phase: TimeoutPhase::Command,
                elapsed: MS,
            });
        }
        Ok(answer)
    }
    async fn extend(&self, lease: &Lease, ttl: Duration) -> Result<Option<Instant>, LockError> {
        self.inner.extend(lease, ttl).await
    }
    async fn release(&self, lease: &Lease) -> Result<bool, LockError> {
        self.releases.fetch_add(1, Ordering::SeqCst);
        self.inner.release(lease).await
    }
}

fn probe(p: Probe) -> (Arc<Probe>, Locker) {
    let p = Arc::new(p);
    (Arc::clone(&p), Locker::from_arc(p))
}

#[tokio::test(start_paused = true)]
async fn bad_input_is_rejected_before_any_io() {
    let (p, locker) = probe(Probe::default());
    let long = "x".repeat(MAX_NAME_LEN + 1);
    let cases = [
        locker.lock(""),
        locker.lock(long.as_str()),
        locker.lock("a").fixed_ttl(Duration::ZERO),
        locker.lock("a").fixed_ttl(Duration::from_micros(500)),
        locker.lock("a").fixed_ttl(MAX_TTL + MS),
    ];
    for request in cases {
        let shown = format!("{request:?}");
        let err = request.acquire().await.expect_err(&shown);
        assert!(
            matches!(err, LockError::InvalidInput { .. }),
            "{shown}: {err}"
        );
        assert!(!err.is_retryable());
    }
    let err = locker.lock("").try_acquire().await.expect_err("empty name");
    assert!(matches!(err, LockError::InvalidInput { .. }));
    assert_eq!(
        p.attempts.load(Ordering::SeqCst),
        0,
        "nothing may reach the backend"
    );
}

#[tokio::test(start_paused = true)]
async fn try_acquire_answers_none_while_held() {
    let (_, locker) = probe(Probe::default());
    let guard = locker
        .lock("a")
        .try_acquire()
        .await
        .expect("ok")
        .expect("free");
    assert!(locker.lock("a").try_acquire().await.expect("ok").is_none());
    guard.release().await.expect("ok");
    assert!(locker.lock("a").try_acquire().await.expect("ok").is_some());
}

#[tokio::test(start_paused = true)]
async fn a_waiter_gets_the_lock_when_the_holder_releases() {
    let (_, locker) = probe(Probe::default());
    let holder = locker.lock("a").acquire().await.expect("free");
    let release_at = Duration::from_millis(50);
    tokio::spawn(async move {
        sleep(release_at).await;
        holder.release().await.expect("released");
    });
    let start = Instant::now();
    let guard = locker
        .lock("a")
        .wait(Duration::from_secs(5))
        .await
        .expect("acquired");
    let waited = start.elapsed();
    // Backoff ceilings 1, 2, 4, 8, 16, 32, 64, 100 ms: the waiter is back within one of them.
    assert!(
        waited >= release_at && waited <= release_at + 64 * MS,
        "waited {waited:?}"
    );
    drop(guard);
}

#[tokio::test(start_paused = true)]
async fn the_wait_is_bounded_by_the_deadline() {
    let (p, locker) = probe(Probe::default());
    let _holder = locker
        .lock("a")
        .fixed_ttl(Duration::from_secs(60))
        .acquire()
        .await
        .expect("free");
    let start = Instant::now();
    let err = locker
        .lock("a")
        .wait(Duration::from_millis(300))
        .acquire()
        .await
        .expect_err("held");
    match err {
        LockError::Timeout {
            phase: TimeoutPhase::Wait,
            elapsed,
        } => {
            assert_eq!(
                elapsed,
                Duration::from_millis(300),
                "gave up exactly at the deadline"
            );
        }
        other => panic!("expected a wait timeout, got {other}"),
    }
    assert_eq!(start.elapsed(), Duration::from_millis(300));
    let attempts = p.attempts.load(Ordering::SeqCst);
    assert!((3..=300).contains(&attempts), "{attempts} attempts");
}

#[tokio::test(start_paused = true)]
async fn zero_wait_makes_exactly_one_attempt() {
    let (p, locker) = probe(Probe::default());
    let _holder = locker.lock("a").acquire().await.expect("free");
    let err = locker
        .lock("a")
        .wait(Duration::ZERO)
        .await
        .expect_err("held");
    assert!(matches!(
        err,
        LockError::Timeout {
            phase: TimeoutPhase::Wait,
            ..
        }
    ));
    assert_eq!(
        p.attempts.load(Ordering::SeqCst),
        2,
        "the holder's attempt and one more"
    );
}

#[tokio::test(start_paused = true)]
async fn a_waiter_never_sleeps_past_the_holders_ttl() {
    // A huge backoff would sleep up to 10 s; the holder's 30 ms TTL must cap every sleep.
    let lock = Arc::new(MemoryLock::new());
    let locker = Locker::builder(Arc::clone(&lock))
        .backoff(Backoff::new(
            Duration::from_secs(10),
            Duration::from_secs(10),
        ))
        .build();
    let holder = locker
        .lock("a")
        .fixed_ttl(Duration::from_millis(30))
        .acquire()
        .await
        .expect("free");
    let start = Instant::now();
    let guard = locker
        .lock("a")
        .wait(Duration::from_secs(60))
        .await
        .expect("acquired after expiry");
    let waited = start.elapsed();
    assert!(
        waited >= Duration::from_millis(30) && waited <= Duration::from_millis(31),
        "waited {waited:?}"
    );
    assert!(guard.fencing_token() > holder.fencing_token());
    // The expired holder's release is refused and leaves the new holder in place.
    assert!(
        matches!(holder.release().await, Err(LockError::NotOwned { .. })),
        "released a lease that was no longer ours"
    );
    assert_eq!(lock.held_count(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_cancelled_acquire_leaves_no_lock_behind() {
    // The backend applies the grant, then takes 1 s to answer; the caller gives up after 10 ms.
    let (p, locker) = probe(Probe {
        stall: Some(Duration::from_secs(1)),
        ..Probe::default()
    });
    let cancelled = tokio::time::timeout(10 * MS, locker.lock("a").acquire()).await;
    assert!(cancelled.is_err(), "the acquire was cancelled mid-flight");
    assert_eq!(p.inner.held_count(), 1, "the grant reached the backend");
    // The background cleanup releases the token that was sent.
    tokio::task::yield_now().await;
    assert_eq!(p.releases.load(Ordering::SeqCst), 1);
    assert_eq!(
        p.inner.held_count(),
        0,
        "cleanup released what the cancelled attempt got"
    );
}

#[tokio::test(start_paused = true)]
async fn a_lost_reply_is_cleaned_up_and_reported() {
    let (p, locker) = probe(Probe {
        lose_reply: true,
        ..Probe::default()
    });
    let err = locker
        .lock("a")
        .wait(Duration::ZERO)
        .acquire()
        .await
        .expect_err("reply lost");
    assert!(
        matches!(
            err,
            LockError::Timeout {
                phase: TimeoutPhase::Command,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.is_retryable());
    assert_eq!(p.attempts.load(Ordering::SeqCst), 1);
    tokio::task::yield_now().await;
    assert_eq!(p.inner.held_count(), 0, "the applied grant was released");
}

#[tokio::test(start_paused = true)]
async fn transient_failures_are_retried_within_the_wait() {
    let (p, locker) = probe(Probe {
        lose_reply: true,
        ..Probe::default()
    });
    let start = Instant::now();
    let err = locker
        .lock("a")
        .wait(Duration::from_millis(200))
        .acquire()
        .await
        .expect_err("every reply lost");
    assert!(
        matches!(
            err,
            LockError::Timeout {
                phase: TimeoutPhase::Command,
                ..
            }
        ),
        "the cause is kept: {err}"
    );
    assert_eq!(
        start.elapsed(),
        Duration::from_millis(200),
        "retried until the deadline, not beyond"
    );
    let attempts = p.attempts.load(Ordering::SeqCst);
    assert!(attempts > 3, "{attempts} attempts");
    tokio::task::yield_now().await;
    assert_eq!(
        p.releases.load(Ordering::SeqCst),
        attempts,
        "every attempt that may have applied is released"
    );
    assert_eq!(p.inner.held_count(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_wait_without_deadline_outlasts_any_clock() {
    let (_, locker) = probe(Probe::default());
    // Longer than any default wait or backoff; not hours: the waiter polls a holder that
    // never announces, and each poll of paused time costs real CPU (2 h took 15 s of it).
    let long = Duration::from_secs(20 * 60);
    for forever in [
        locker.lock("a").wait(Duration::MAX), // was InvalidInput: "overflows the clock"
        locker.lock("a").wait_forever(),
    ] {
        let holder = locker.lock("a").fixed_ttl(2 * long).await.expect("free");
        let start = Instant::now();
        let waiter = tokio::spawn(forever.acquire());
        sleep(long).await;
        assert!(!waiter.is_finished(), "still waiting after 20 minutes");
        holder.release().await.expect("ours");
        let guard = waiter.await.expect("no panic").expect("acquired");
        assert!(start.elapsed() >= long);
        guard.release().await.expect("ours");
    }
}

#[tokio::test(start_paused = true)]
async fn failures_are_retried_for_the_budget_however_long_the_wait() {
    let lose = || Probe {
        lose_reply: true,
        ..Probe::default()
    };
    let (_, locker) = probe(lose());
    let per_request = Duration::from_secs(1);
    let cases = [
        (
            locker.lock("a").wait_forever(),
            lock_core::DEFAULT_RETRY_ERRORS_FOR,
        ),
        (
            locker.lock("a").wait(Duration::from_secs(3_600)),
            lock_core::DEFAULT_RETRY_ERRORS_FOR,
        ),
        (
            locker
                .lock("a")
                .wait_forever()
                .retry_errors_for(per_request),
            per_request,
        ),
    ];
    for (request, budget) in cases {
        let start = Instant::now();
        let err = request.acquire().await.expect_err("every reply lost");
        assert!(
            matches!(
                err,
                LockError::Timeout {
                    phase: TimeoutPhase::Command,
                    ..
                }
            ),
            "the backend's error, not a wait timeout: {err}"
        );
        let took = start.elapsed();
        // Retried until the budget, then one backoff step at most (100 ms ceiling).
        assert!(
            took >= budget && took <= budget + 100 * MS,
            "{took:?} for a budget of {budget:?}"
        );
    }
    // The locker's own setting.
    let p = Arc::new(lose());
    let locker = Locker::builder(Arc::clone(&p))
        .retry_errors_for(per_request)
        .build();
    let start = Instant::now();
    locker
        .lock("a")
        .wait_forever()
        .acquire()
        .await
        .expect_err("every reply lost");
    assert!(start.elapsed() <= per_request + 100 * MS);
}

#[tokio::test(start_paused = true)]
async fn permanent_failures_are_returned_at_once() {
    #[derive(Default)]
    struct Refusing(AtomicU32);
    #[async_trait]
    impl Lock for Refusing {
        fn backend(&self) -> &'static str {
            "refusing"
        }
        async fn try_acquire(&self, _: &str, _: Token, _: Duration) -> Result<Attempt, LockError> {
            self.0.fetch_add(1, Ordering::SeqCst);
            Err(LockError::Backend {
                backend: "refusing",
                op: Op::Acquire,
                retryable: false,
                source: "WRONGPASS".into(),
            })
        }
        async fn extend(&self, _: &Lease, _: Duration) -> Result<Option<Instant>, LockError> {
            Ok(None)
        }
        async fn release(&self, _: &Lease) -> Result<bool, LockError> {
            Ok(false)
        }
    }
    let refusing = Arc::new(Refusing::default());
    let locker = Locker::from_arc(refusing.clone());
    let err = locker
        .lock("a")
        .wait(Duration::from_secs(5))
        .await
        .expect_err("refused");
    assert!(matches!(
        err,
        LockError::Backend {
            retryable: false,
            ..
        }
    ));
    assert_eq!(refusing.0.load(Ordering::SeqCst), 1, "not retried");
}

#[tokio::test(start_paused = true)]
async fn dropping_a_guard_releases_in_the_background() {
    let (p, locker) = probe(Probe::default());
    let guard = locker.lock("a").acquire().await.expect("free");
    drop(guard);
    assert_eq!(p.inner.held_count(), 1, "release on drop is not immediate");
    tokio::task::yield_now().await;
    assert_eq!(p.inner.held_count(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_leaked_lease_stays_held_until_released() {
    let (p, locker) = probe(Probe::default());
    let lease = locker.lock("a").acquire().await.expect("free").leak();
    tokio::task::yield_now().await;
    assert_eq!(p.inner.held_count(), 1);
    assert_eq!(p.releases.load(Ordering::SeqCst), 0);
    locker.release(&lease).await.expect("ours");
    assert_eq!(p.inner.held_count(), 0);
}

#[tokio::test(start_paused = true)]
async fn extend_keeps_the_lock_and_reports_loss() {
    let (p, locker) = probe(Probe::default());
    let mut guard = locker
        .lock("a")
        .fixed_ttl(100 * MS)
        .acquire()
        .await
        .expect("free");
    advance(90 * MS).await;
    guard.extend(100 * MS).await.expect("still ours");
    assert_eq!(guard.remaining(), 100 * MS);
    advance(90 * MS).await;
    assert_eq!(p.inner.held_count(), 1);
    advance(20 * MS).await;
    let err = guard.extend(100 * MS).await.expect_err("expired");
    assert!(
        matches!(err, LockError::NotOwned { ref name } if name == "a"),
        "{err}"
    );
    assert!(matches!(
        guard.extend(Duration::ZERO).await,
        Err(LockError::InvalidInput { .. })
    ));
}

#[test]
fn dropping_a_guard_outside_a_runtime_does_not_panic() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    let lock = Arc::new(MemoryLock::new());
    let locker = Locker::new(Arc::clone(&lock));
    let guard = runtime.block_on(locker.lock("a").acquire()).expect("free");
    drop(runtime);
    drop(guard); // no runtime: logged, left to expire
    assert_eq!(lock.held_count(), 1);
}

#[test]
fn errors_say_what_happened() {
    let e = LockError::Backend {
        backend: "redis",
        op: Op::Acquire,
        retryable: true,
        source: "connection refused".into(),
    };
    assert_eq!(
        e.to_string(),
        "redis backend failed during acquire: connection refused"
    );
    assert!(e.is_retryable());
    let e = LockError::Timeout {
        phase: TimeoutPhase::Wait,
        elapsed: Duration::from_secs(2),
    };
    assert_eq!(e.to_string(), "timed out waiting for the lock after 2s");
}
