//! A server restart (a crash: SIGKILL, then InnoDB's recovery) under contention: tasks of two
//! lockers (two pools, like two processes) keep taking one name through it. No two holders
//! overlap, and the fencing tokens of successive grants keep growing across the restart.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use lock_core::Locker;
use lock_testkit::MariadbServer;

const NAME: &str = "restart-contended";
const LEASE: Duration = Duration::from_secs(2);
const TASKS: usize = 4;

/// What the holders saw: how many were inside at once, and the fencing token of each grant.
#[derive(Default)]
struct Record {
    inside: AtomicUsize,
    overlaps: AtomicUsize,
    fences: Mutex<Vec<u64>>,
}

async fn contend(locker: Locker, record: Arc<Record>, stop: Arc<AtomicBool>) {
    let mut rounds = 0;
    while !stop.load(Ordering::Relaxed) && rounds < 10_000 {
        rounds += 1;
        let acquired = locker
            .lock(NAME)
            .lease(LEASE)
            .wait(Duration::from_secs(5))
            .retry_errors_for(Duration::from_secs(10))
            .acquire()
            .await;
        let Ok(guard) = acquired else {
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        };
        if record.inside.fetch_add(1, Ordering::SeqCst) != 0 {
            record.overlaps.fetch_add(1, Ordering::SeqCst);
        }
        record
            .fences
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(guard.fencing_token());
        tokio::time::sleep(Duration::from_millis(5)).await;
        record.inside.fetch_sub(1, Ordering::SeqCst);
        let _ = guard.release().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_overlap_and_growing_tokens_across_a_restart() {
    let mut server = MariadbServer::start().expect("start mariadb");
    let url = server.url();
    crate::common::lock(&url).migrate().await.expect("migrate");
    let record = Arc::new(Record::default());
    let stop = Arc::new(AtomicBool::new(false));
    let lockers = [
        Locker::new(crate::common::lock(&url)),
        Locker::new(crate::common::lock(&url)),
    ];
    let tasks: Vec<_> = (0..TASKS)
        .map(|i| {
            let locker = lockers[i % 2].clone();
            tokio::spawn(contend(locker, Arc::clone(&record), Arc::clone(&stop)))
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = record
        .fences
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .len();
    server.stop();
    tokio::time::sleep(Duration::from_millis(300)).await;
    server.start_again().expect("start again");
    let restarted = std::time::Instant::now();
    // Bounded: until some grants after the restart, at most 15 s.
    while record
        .fences
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .len()
        < before + 5
        && restarted.elapsed() < Duration::from_secs(15)
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        task.await.expect("task");
    }
    let fences = record
        .fences
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    assert!(before > 0, "no grant before the restart");
    assert!(
        fences.len() >= before + 5,
        "{} grants after the restart",
        fences.len() - before
    );
    assert_eq!(
        record.overlaps.load(Ordering::SeqCst),
        0,
        "holders overlapped"
    );
    assert!(
        fences.windows(2).all(|w| w[0] < w[1]),
        "fencing tokens not strictly increasing: {fences:?}"
    );
}
