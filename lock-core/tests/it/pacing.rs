//! How a waiter paces its attempts: a waiter told of releases sleeps until one (or the holder's
//! TTL) instead of polling; a backend that fails is retried for the budget counted from the
//! start of the current run of failures (a busy answer ends the run); the warning about it is
//! logged once a second, not at every retry; and requests that end on a backend's own busy or
//! quorum error are counted under their reason.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lock_core::{LockError, Locker, metric};
use tokio::time::sleep;

use crate::common::{Failing, Failure, Probe, recorded_while};

/// A waiter subscribed to the releases of a holder that announces them sleeps until the
/// release or the holder's TTL: over 5 s behind a holder of 60 s it tries about once.
#[tokio::test(start_paused = true)]
async fn a_waiter_told_of_releases_does_not_poll() {
    let probe = Arc::new(Probe::default());
    probe.announces.store(true, Ordering::SeqCst);
    let holder = Locker::new(Arc::clone(&probe))
        .lock("job")
        .fixed_ttl(Duration::from_secs(60))
        .await
        .expect("free");
    let attempts = probe.count(&probe.attempts);
    let gave_up = Locker::new(Arc::clone(&probe))
        .lock("job")
        .wait(Duration::from_secs(5))
        .await;
    assert!(
        matches!(gave_up, Err(LockError::Timeout { .. })),
        "{gave_up:?}"
    );
    let tried = probe.count(&probe.attempts) - attempts;
    assert!(tried <= 3, "{tried} attempts in 5 s behind a 60 s holder");
    holder.release().await.expect("ours");
}

/// The retry budget bounds one run of failures: a busy answer in between ends the run, so two
/// runs of 1.5 s under a 2 s budget never end the wait.
#[tokio::test(start_paused = true)]
async fn a_busy_answer_ends_a_run_of_failures() {
    let store = Failing::new();
    let holder = Locker::new(Arc::clone(&store))
        .lock("job")
        .fixed_ttl(Duration::from_secs(60))
        .await
        .expect("free");
    let outages = {
        let store = Arc::clone(&store);
        tokio::spawn(async move {
            for _ in 0..2 {
                store.fail(Failure::NothingApplied);
                sleep(Duration::from_millis(1_500)).await;
                store.fail(Failure::None);
                sleep(Duration::from_secs(1)).await;
            }
        })
    };
    let waiter = {
        let locker = Locker::builder(Arc::clone(&store))
            .retry_errors_for(Duration::from_secs(2))
            .build();
        tokio::spawn(async move {
            locker
                .lock("job")
                .wait(Duration::from_secs(20))
                .await
                .map(drop)
        })
    };
    outages.await.expect("task");
    holder.release().await.expect("ours");
    waiter
        .await
        .expect("task")
        .expect("granted: no run of failures lasted the budget");
}

/// Counts the events at WARN.
#[derive(Clone, Default)]
struct Warnings(Arc<Mutex<u32>>);

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Warnings {
    fn on_event(
        &self,
        event: &tracing::Event<'_>,
        _ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        if *event.metadata().level() == tracing::Level::WARN {
            *self.0.lock().expect("lock") += 1;
        }
    }
}

/// A backend failing for 3.5 s while a request waits is logged at WARN once a second (not at
/// every retry, and not never).
#[test]
fn a_failing_backend_is_warned_about_once_a_second() {
    use tracing_subscriber::layer::SubscriberExt;

    let warnings = Warnings::default();
    let subscriber = tracing_subscriber::registry().with(warnings.clone());
    tracing::subscriber::with_default(subscriber, || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .expect("runtime");
        runtime.block_on(async {
            let store = Failing::new();
            store.fail(Failure::NothingApplied);
            let locker = Locker::builder(Arc::clone(&store))
                .retry_errors_for(Duration::from_secs(60))
                .build();
            let gave_up = locker.lock("job").wait(Duration::from_millis(3_500)).await;
            assert!(gave_up.is_err(), "the backend never answered");
        });
    });
    let warned = *warnings.0.lock().expect("lock");
    assert!(
        (3..=4).contains(&warned),
        "{warned} warnings over 3.5 s of failures"
    );
}

/// A request ended by the backend's own busy error, or by a quorum not reached, is counted in
/// `distlock_not_acquired_total` under `reason="busy"` and `reason="quorum"`.
#[test]
fn backend_busy_and_quorum_errors_are_counted_under_their_reason() {
    let snapshot = recorded_while(async {
        let store = Failing::new();
        let locker = Locker::new(Arc::clone(&store));
        store.fail(Failure::BusyError);
        let busy = locker.lock("job").try_acquire().await;
        assert!(matches!(busy, Err(LockError::Busy { .. })), "{busy:?}");
        store.fail(Failure::NothingApplied);
        let quorum = locker.lock("job").try_acquire().await;
        assert!(
            matches!(quorum, Err(LockError::QuorumNotReached { .. })),
            "{quorum:?}"
        );
    });
    let counted = |reason: &str| -> u64 {
        snapshot
            .iter()
            .filter(|(key, ..)| {
                key.key().name() == metric::NOT_ACQUIRED_TOTAL
                    && key
                        .key()
                        .labels()
                        .any(|l| l.key() == "reason" && l.value() == reason)
            })
            .map(|(.., value)| match value {
                metrics_util::debugging::DebugValue::Counter(n) => *n,
                other => panic!("not a counter: {other:?}"),
            })
            .sum()
    };
    assert_eq!(counted("busy"), 1, "{snapshot:?}");
    assert_eq!(counted("quorum"), 1, "{snapshot:?}");
}

/// An attempt whose answer was lost is released in the background; when that release fails
/// too (the store is down), the failure is logged at WARN once, however many fail within ten
/// seconds, so an outage does not flood the log (nextest runs each test in a process of its
/// own, so the process-wide rate limit starts fresh here).
#[test]
fn a_failed_background_release_is_warned_about_once() {
    use tracing_subscriber::layer::SubscriberExt;

    let warnings = Warnings::default();
    let subscriber = tracing_subscriber::registry().with(warnings.clone());
    tracing::subscriber::with_default(subscriber, || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async {
            let store = Failing::new();
            let locker = Locker::new(Arc::clone(&store));
            store.fail(Failure::AppliedThenTimedOut);
            store.failing_releases.store(true, Ordering::SeqCst);
            for name in ["a", "b", "c"] {
                let lost = locker.lock(name).try_acquire().await;
                assert!(matches!(lost, Err(LockError::Timeout { .. })), "{lost:?}");
            }
            for _ in 0..100 {
                if store.count(&store.releases) == 3 {
                    break;
                }
                sleep(Duration::from_millis(5)).await;
            }
            assert_eq!(
                store.count(&store.releases),
                3,
                "each released in the background"
            );
        });
    });
    assert_eq!(*warnings.0.lock().expect("lock"), 1);
}
