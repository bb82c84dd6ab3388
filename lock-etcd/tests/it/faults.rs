//! Three members and a fault in the middle of a contended run: the leader killed, a follower
//! killed, the leader partitioned from clients and peers (a minority). Workers on lockers of
//! their own (each an `EtcdLock` on every member's endpoint) take one name over and over;
//! whatever happens, no two hold it at once, the fencing tokens of successive grants strictly
//! increase, and grants go on after the fault.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use lock_core::Locker;
use lock_etcd::EtcdLock;
use lock_testkit::EtcdCluster;
use tokio::time::Instant;

const WORKERS: usize = 3;
/// The lease of every grant: renewed while held, so it only runs out for a holder cut off.
const LEASE: Duration = Duration::from_secs(2);
/// How long a holder stays inside.
const INSIDE: Duration = Duration::from_millis(20);
/// Grants wanted after the fault, and the bound on the whole run.
const AFTER_FAULT: usize = 20;
const RUN_BOUND: Duration = Duration::from_secs(60);
/// Attempts per worker, whatever the clock says.
const MAX_ATTEMPTS: usize = 2_000;

#[derive(Debug, Clone, Copy)]
enum Fault {
    KillLeader,
    KillFollower,
    PartitionLeader,
}

/// What the workers saw.
#[derive(Default)]
struct Record {
    inside: AtomicBool,
    overlaps: AtomicUsize,
    /// Fencing tokens in grant order (pushed while inside).
    tokens: Mutex<Vec<u64>>,
    /// When each grant was seen, in the same order.
    times: Mutex<Vec<Instant>>,
    stop: AtomicBool,
}

async fn worker(endpoints: Vec<String>, record: Arc<Record>) {
    let lock = EtcdLock::builder()
        .endpoints(endpoints)
        .command_timeout(Duration::from_secs(1))
        .build()
        .expect("valid endpoints");
    let locker = Locker::new(lock);
    for _ in 0..MAX_ATTEMPTS {
        if record.stop.load(Ordering::SeqCst) {
            return;
        }
        let Ok(guard) = locker
            .lock("contended")
            .lease(LEASE)
            .wait(Duration::from_secs(5))
            .await
        else {
            // The cluster is failing over: try again shortly.
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        if record.inside.swap(true, Ordering::SeqCst) {
            record.overlaps.fetch_add(1, Ordering::SeqCst);
        }
        record
            .tokens
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(guard.fencing_token());
        record
            .times
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Instant::now());
        tokio::time::sleep(INSIDE).await;
        record.inside.store(false, Ordering::SeqCst);
        // A release lost in the fault leaves the key to its lease.
        let _ = guard.release().await;
    }
}

fn granted(record: &Record) -> usize {
    record
        .tokens
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .len()
}

async fn run(fault: Fault) {
    let mut cluster = EtcdCluster::builder().members(3).start().expect("start");
    let record = Arc::new(Record::default());
    let workers: Vec<_> = (0..WORKERS)
        .map(|_| tokio::spawn(worker(cluster.endpoints(), Arc::clone(&record))))
        .collect();
    let started = Instant::now();
    while granted(&record) < AFTER_FAULT && started.elapsed() < RUN_BOUND {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let leader = cluster.leader().expect("leader");
    let target = match fault {
        Fault::KillLeader | Fault::PartitionLeader => leader,
        Fault::KillFollower => (leader + 1) % 3,
    };
    let before = granted(&record);
    let faulted = Instant::now();
    match fault {
        Fault::KillLeader | Fault::KillFollower => cluster.kill(target),
        Fault::PartitionLeader => cluster.partition(target).expect("partition"),
    }
    while granted(&record) < before + AFTER_FAULT && started.elapsed() < RUN_BOUND {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let recovered = faulted.elapsed();
    let first_after = record
        .times
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(before)
        .map(|t| t.saturating_duration_since(faulted));
    eprintln!(
        "{fault:?}: {before} grants in {:?} before the fault; after it, the first grant in \
         {first_after:?} and {} in {recovered:?}",
        faulted.duration_since(started),
        granted(&record) - before
    );
    record.stop.store(true, Ordering::SeqCst);
    for worker in workers {
        tokio::time::timeout(Duration::from_secs(30), worker)
            .await
            .expect("a worker hung")
            .expect("a worker panicked");
    }
    match fault {
        Fault::KillLeader | Fault::KillFollower => cluster.restart(target).expect("restart"),
        Fault::PartitionLeader => cluster.heal(target).expect("heal"),
    }
    let tokens = record
        .tokens
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    assert_eq!(
        record.overlaps.load(Ordering::SeqCst),
        0,
        "{fault:?}: two holders at once"
    );
    assert!(
        tokens.windows(2).all(|pair| pair[0] < pair[1]),
        "{fault:?}: fencing tokens did not strictly increase: {tokens:?}"
    );
    assert!(
        tokens.len() >= before + AFTER_FAULT,
        "{fault:?}: only {} grants after the fault in {recovered:?}",
        tokens.len() - before
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_leader_killed() {
    run(Fault::KillLeader).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_killed() {
    run(Fault::KillFollower).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_leader_partitioned() {
    run(Fault::PartitionLeader).await;
}
