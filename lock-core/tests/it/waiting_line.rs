//! The local waiting line: first-in first-out, only the head contends, a local release wakes
//! the head at once, a single try never jumps the line, and remote releases arrive through one
//! shared subscription per name.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::{Probe, probe_locker, slow_polling_locker};
use lock_core::{Guard, LockError, Locker, TimeoutPhase};
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep};

const MS: Duration = Duration::from_millis(1);
const LONG: Duration = Duration::from_secs(60);
/// Every test contends for this one name.
const NAME: &str = "a";

/// A probe whose releases are announced to watchers (as Redis pub/sub would) or not, and a
/// locker over it whose waiters would poll only every 10 s.
fn slow_line(announces: bool) -> (Arc<Probe>, Locker) {
    let probe = Arc::new(Probe::default());
    probe.announces.store(announces, Ordering::SeqCst);
    let locker = slow_polling_locker(&probe);
    (probe, locker)
}

/// `NAME` with a fixed `LONG` TTL: nothing expires or renews while a test runs.
async fn hold(locker: &Locker) -> Guard {
    locker.lock(NAME).fixed_ttl(LONG).await.expect("free")
}

/// Waits up to `LONG` for `NAME`, with a fixed `LONG` TTL.
async fn wait_for(locker: &Locker) -> Result<Guard, LockError> {
    locker.lock(NAME).fixed_ttl(LONG).wait(LONG).await
}

/// Runs `task` on a task of its own with a clone of `locker`.
fn spawn_on<T, F>(locker: &Locker, task: impl FnOnce(Locker) -> F) -> JoinHandle<T>
where
    F: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    tokio::spawn(task(locker.clone()))
}

/// A waiter that reports the fencing token it was granted, or why it was not.
fn token_waiter(locker: &Locker) -> JoinHandle<Result<u64, LockError>> {
    spawn_on(locker, |locker| async move {
        wait_for(&locker).await.map(|g| g.fencing_token())
    })
}

/// A waiter that takes its turn: waits, calls `granted`, holds the lock 1 ms, releases it.
fn turn(locker: &Locker, granted: impl FnOnce() + Send + 'static) -> JoinHandle<()> {
    spawn_on(locker, |locker| async move {
        let guard = wait_for(&locker).await.expect("acquired");
        granted();
        sleep(MS).await;
        guard.release().await.expect("ok");
    })
}

#[tokio::test(start_paused = true)]
async fn waiters_are_served_in_arrival_order() {
    // Announced releases: the head waits for the holder's release instead of polling.
    let (probe, locker) = slow_line(true);
    let holder = hold(&locker).await;
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for id in 0..5 {
        let order = Arc::clone(&order);
        tasks.push(turn(&locker, move || order.lock().expect("lock").push(id)));
        sleep(MS).await; // fix the arrival order
    }
    let attempts_before = probe.count(&probe.attempts);
    sleep(Duration::from_secs(5)).await;
    assert_eq!(
        probe.count(&probe.attempts),
        attempts_before,
        "nobody polls a held lock while the line waits"
    );
    holder.release().await.expect("ok");
    for task in tasks {
        task.await.expect("no panic");
    }
    assert_eq!(*order.lock().expect("lock"), [0, 1, 2, 3, 4]);
    // Five grants and the head's first tries: non-heads never contended.
    assert!(
        probe.count(&probe.attempts) <= attempts_before + 5,
        "only heads attempt"
    );
}

#[tokio::test(start_paused = true)]
async fn a_local_release_wakes_the_head_at_once() {
    let (_, locker) = slow_line(false);
    let holder = hold(&locker).await;
    let releaser = tokio::spawn(async move {
        sleep(Duration::from_millis(100)).await;
        holder.release().await.expect("ok");
    });
    let started = Instant::now();
    let guard = wait_for(&locker).await.expect("acquired");
    assert_eq!(
        started.elapsed(),
        Duration::from_millis(100),
        "woken by the release, not by a 10 s poll"
    );
    releaser.await.expect("no panic");
    drop(guard);
}

#[tokio::test(start_paused = true)]
async fn a_releaser_that_asks_again_goes_to_the_back() {
    let (_, locker) = slow_line(false);
    let first = hold(&locker).await;
    let waiter = spawn_on(&locker, |locker| async move {
        let guard = wait_for(&locker).await.expect("acquired");
        sleep(Duration::from_secs(1)).await; // hold it
        guard.fencing_token()
    });
    sleep(MS).await;
    first.release().await.expect("ok");
    // At once, the old holder asks again: the waiter was first in line.
    let again = locker
        .lock(NAME)
        .fixed_ttl(LONG)
        .wait(Duration::from_millis(5))
        .await;
    assert!(
        matches!(
            again,
            Err(LockError::Timeout {
                phase: TimeoutPhase::Wait,
                ..
            })
        ),
        "{again:?}"
    );
    assert!(waiter.await.expect("no panic") > 0);
}

#[tokio::test(start_paused = true)]
async fn a_single_try_does_not_jump_the_line() {
    let (probe, locker) = slow_line(false);
    let holder = hold(&locker).await;
    let waiter = token_waiter(&locker);
    sleep(MS).await;
    let attempts = probe.count(&probe.attempts);
    assert!(locker.lock(NAME).try_acquire().await.expect("ok").is_none());
    assert_eq!(
        probe.count(&probe.attempts),
        attempts,
        "answered without asking the backend"
    );
    holder.release().await.expect("ok");
    waiter.await.expect("no panic").expect("the waiter got it");
}

#[tokio::test(start_paused = true)]
async fn a_waiter_that_gives_up_lets_the_next_in() {
    let (_, locker) = slow_line(false);
    let holder = hold(&locker).await;
    let impatient = spawn_on(&locker, |locker| async move {
        locker
            .lock(NAME)
            .wait(Duration::from_millis(50))
            .await
            .map(drop)
    });
    sleep(MS).await;
    let patient = token_waiter(&locker);
    let cancelled = spawn_on(&locker, |locker| async move {
        locker.lock(NAME).wait(LONG).await.map(drop)
    });
    sleep(Duration::from_millis(100)).await;
    assert!(matches!(
        impatient.await.expect("no panic"),
        Err(LockError::Timeout { .. })
    ));
    cancelled.abort();
    holder.release().await.expect("ok");
    patient
        .await
        .expect("no panic")
        .expect("the next in line got it");
}

#[tokio::test(start_paused = true)]
async fn remote_releases_wake_waiters_through_one_shared_subscription() {
    // Two lockers over one backend stand for two processes: only the backend's announcement
    // can tell the second that the first released.
    let (probe, process_a) = slow_line(true);
    let process_b = slow_polling_locker(&probe);
    let holder = hold(&process_a).await;
    let waiters: Vec<_> = (0..50).map(|_| turn(&process_b, || ())).collect();
    sleep(Duration::from_millis(100)).await;
    assert_eq!(
        probe.count(&probe.watch_calls),
        1,
        "one subscription for 50 waiters"
    );
    let started = Instant::now();
    holder.release().await.expect("ok");
    for waiter in waiters {
        waiter.await.expect("no panic");
    }
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "woken by announcements, not 10 s polls: {:?}",
        started.elapsed()
    );
    assert_eq!(
        probe.watches_alive.load(Ordering::SeqCst),
        0,
        "the subscription ended with the line"
    );
}

#[tokio::test(start_paused = true)]
async fn a_lost_announcement_costs_latency_not_liveness() {
    // The backend announces nothing, yet a remote holder's lock expiring lets the waiter in,
    // at the holder's TTL and not at the next 10 s poll.
    let (probe, process_a) = slow_line(false);
    let process_b = slow_polling_locker(&probe);
    let _crashed = process_a
        .lock(NAME)
        .fixed_ttl(Duration::from_millis(300))
        .await
        .expect("free")
        .leak();
    let started = Instant::now();
    let _guard = wait_for(&process_b).await.expect("acquired after the TTL");
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(300) && waited <= Duration::from_millis(301),
        "{waited:?}"
    );
}

/// A waiter of this process holds the lock with a renewed lease while the next one waits in
/// line: the head waits for its release however often renewal moves the lease's end, and sends
/// no attempt that cannot succeed. (It used to try once when the holder's first lease would
/// have ended: one busy attempt per renewed hold.)
#[tokio::test(start_paused = true)]
async fn a_renewed_local_holder_costs_the_line_no_attempt() {
    let (probe, locker) = probe_locker(Duration::from_millis(300));
    probe.announces.store(true, Ordering::SeqCst);
    let first = locker.lock(NAME).await.expect("free");
    let (got_it, granted) = tokio::sync::oneshot::channel();
    let holder = spawn_on(&locker, |locker| async move {
        let guard = locker.lock(NAME).wait(LONG).await.expect("acquired");
        got_it.send(()).expect("test waits");
        sleep(Duration::from_secs(3)).await; // ten leases, each renewed
        guard.release().await.expect("ours");
    });
    sleep(MS).await;
    let next = spawn_on(&locker, |locker| async move {
        locker.lock(NAME).wait(LONG).await
    });
    sleep(MS).await;
    first.release().await.expect("ours");
    granted.await.expect("the first waiter got the lock");
    let before = probe.attempts.load(Ordering::SeqCst);
    sleep(Duration::from_secs(2)).await;
    assert!(!next.is_finished());
    assert_eq!(
        probe.attempts.load(Ordering::SeqCst),
        before,
        "the head waited for the local holder instead of trying"
    );
    holder.await.expect("no panic");
    let guard = next
        .await
        .expect("no panic")
        .expect("acquired after the release");
    guard.release().await.expect("ours");
}

/// A backend that announces no releases is asked once per line, not at every busy attempt: the
/// answer does not change while the waiter polls.
#[tokio::test(start_paused = true)]
async fn a_backend_without_announcements_is_asked_to_subscribe_once() {
    let (probe, locker) = probe_locker(LONG);
    let holder = hold(&locker).await;
    let waiter = Locker::new(Arc::clone(&probe));
    let attempts = probe.count(&probe.attempts);
    let gave_up = waiter.lock(NAME).wait(Duration::from_secs(2)).await;
    assert!(
        matches!(gave_up, Err(LockError::Timeout { .. })),
        "{gave_up:?}"
    );
    assert!(
        probe.count(&probe.attempts) - attempts >= 5,
        "the waiter polled"
    );
    assert_eq!(
        probe.count(&probe.watch_calls),
        1,
        "asked to subscribe once"
    );
    holder.release().await.expect("ours");
}

/// A fair waiter of another process subscribes to its own turn (the store tells the head of
/// the queue alone) and is granted at once when the holder releases, long before its next
/// poll, on a backend that announces nothing else.
#[tokio::test(start_paused = true)]
async fn a_fair_waiter_is_woken_at_its_turn() {
    let probe = Arc::new(Probe::default());
    probe.turns.store(true, Ordering::SeqCst);
    let holder = slow_polling_locker(&probe)
        .fair(NAME)
        .fixed_ttl(LONG)
        .await
        .expect("free");
    let waiter = spawn_on(&slow_polling_locker(&probe), |locker| async move {
        locker.fair(NAME).wait(LONG).await.map(|_| Instant::now())
    });
    sleep(Duration::from_millis(100)).await;
    assert_eq!(
        probe.count(&probe.turn_calls),
        1,
        "the waiter subscribed to its turn"
    );
    let released_at = Instant::now();
    holder.release().await.expect("ours");
    let granted_at = waiter.await.expect("task").expect("granted");
    assert!(
        granted_at - released_at < Duration::from_millis(100),
        "granted {:?} after the release (polls every 10 s)",
        granted_at - released_at
    );
}
