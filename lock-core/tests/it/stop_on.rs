//! Tying a lock or an election to a stop signal (`LockRequest::stop_on`,
//! `ElectionRun::stop_on`, `shutdown()`): when it fires, a wait is given up, running work is
//! cancelled and the lock or the term given back at once, so the next holder does not wait for
//! the lease to run out.

use std::sync::Arc;
use std::time::Duration;

use lock_core::{LockError, Locker, MemoryLock, TermEnd, TermEvent, shutdown};
use tokio::sync::oneshot;
use tokio::time::{Instant, sleep, timeout};

const LEASE: Duration = Duration::from_secs(30);

fn two_lockers() -> (Locker, Locker) {
    let store = Arc::new(MemoryLock::new());
    (
        Locker::new(Arc::clone(&store)),
        Locker::new(Arc::clone(&store)),
    )
}

/// A signal the test fires by hand.
fn signal() -> (
    oneshot::Sender<()>,
    impl Future<Output = ()> + Send + 'static,
) {
    let (fire, fired) = oneshot::channel::<()>();
    (fire, async move {
        let _ = fired.await;
    })
}

#[tokio::test(start_paused = true)]
async fn the_signal_cancels_the_work_and_releases_at_once() {
    let (holder, other) = two_lockers();
    let (fire, stop) = signal();
    let (started_tx, started) = oneshot::channel();
    let run = tokio::spawn(async move {
        holder
            .lock("job")
            .lease(LEASE)
            .stop_on(stop)
            .run(|_lease| async move {
                let _ = started_tx.send(());
                sleep(Duration::from_secs(3600)).await;
                "finished"
            })
            .await
    });
    started.await.expect("the work started");
    fire.send(()).expect("fire");
    let answer = run.await.expect("the run");
    assert!(
        matches!(&answer, Err(LockError::Stopped { name }) if name == "job"),
        "{answer:?}"
    );
    // Released, not left to its 30 s lease.
    let next = other.lock("job").try_acquire().await.expect("answers");
    assert!(next.is_some(), "the stopped run left the lock held");
}

#[tokio::test(start_paused = true)]
async fn the_signal_ends_a_wait() {
    let (holder, waiter) = two_lockers();
    let _held = holder.lock("job").lease(LEASE).await.expect("free");
    let (fire, stop) = signal();
    let asked = Instant::now();
    let wait = tokio::spawn(async move {
        waiter
            .lock("job")
            .wait(Duration::from_secs(600))
            .stop_on(stop)
            .acquire()
            .await
    });
    sleep(Duration::from_secs(1)).await;
    fire.send(()).expect("fire");
    let answer = wait.await.expect("the wait");
    assert!(
        matches!(answer, Err(LockError::Stopped { .. })),
        "{answer:?}"
    );
    assert!(asked.elapsed() < Duration::from_secs(2), "the wait went on");
}

#[tokio::test(start_paused = true)]
async fn an_unfired_signal_changes_nothing() {
    let (locker, _) = two_lockers();
    let (_fire, stop) = signal();
    let out = locker
        .lock("job")
        .stop_on(stop)
        .run(|_lease| async { 7 })
        .await
        .expect("ran");
    assert_eq!(out, 7);
}

#[tokio::test(start_paused = true)]
async fn a_stopped_leader_resigns_and_the_next_is_elected_at_once() {
    let (first, second) = two_lockers();
    let (fire, stop) = signal();
    let mut run = first
        .elect("scheduler")
        .lease(LEASE)
        .run(|_term| std::future::pending::<()>())
        .stop_on(stop);
    assert!(matches!(
        run.next_event().await,
        Some(TermEvent::Started { .. })
    ));
    let next = tokio::spawn(async move {
        second
            .elect("scheduler")
            .lease(LEASE)
            .campaign()
            .await
            .map(|leadership| (leadership.term(), Instant::now()))
    });
    sleep(Duration::from_millis(100)).await;
    fire.send(()).expect("fire");
    let fired = Instant::now();
    timeout(Duration::from_secs(5), run.wait())
        .await
        .expect("the run ended");
    assert!(matches!(
        run.next_event().await,
        Some(TermEvent::Ended {
            end: TermEnd::Stopped,
            ..
        })
    ));
    let (term, at) = next.await.expect("task").expect("elected");
    assert!(term > 0);
    assert!(
        at - fired < Duration::from_secs(1),
        "the next leader came {:?} after the stop, not at once",
        at - fired
    );
}

#[tokio::test]
async fn shutdown_resolves_on_sigterm_and_at_once_after_it() {
    let signal = shutdown();
    // SIGTERM to this test's own process, by its PID (nextest runs each test in a process of
    // its own; the handler `shutdown()` installed keeps it alive).
    let sent = std::process::Command::new("kill")
        .args(["-TERM", &std::process::id().to_string()])
        .status()
        .expect("kill");
    assert!(sent.success());
    timeout(Duration::from_secs(5), signal)
        .await
        .expect("shutdown() resolved on SIGTERM");
    timeout(Duration::from_millis(100), shutdown())
        .await
        .expect("a shutdown() made after the signal resolves at once");
}

#[tokio::test(start_paused = true)]
async fn a_multi_lock_tied_to_the_signal_releases_every_name() {
    let (holder, other) = two_lockers();
    let (fire, stop) = signal();
    let (started_tx, started) = oneshot::channel();
    let run = tokio::spawn(async move {
        holder
            .lock_all(["a", "b"])
            .lease(LEASE)
            .stop_on(stop)
            .run(|_leases| async move {
                let _ = started_tx.send(());
                std::future::pending::<()>().await;
            })
            .await
    });
    started.await.expect("the work started");
    fire.send(()).expect("fire");
    let answer = run.await.expect("the run");
    assert!(
        matches!(answer, Err(LockError::Stopped { .. })),
        "{answer:?}"
    );
    let next = other
        .lock_all(["a", "b"])
        .try_acquire()
        .await
        .expect("answers");
    assert!(next.is_some(), "the stopped multi-lock left a name held");
}
