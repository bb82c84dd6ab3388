//! Issue 46's cancellation storm, across OS processes, on a SeaweedFS started for it (lock-testkit,
//! free loopback ports, stopped by its PID): each run, one process makes 300 acquires on 10
//! names, each dropped after 0–10 ms, and exits a second later; then a fresh process tries every
//! name once. A name it finds held is held by a grant nobody received.
//!
//! `cargo run -p lock-object-store --example cancel_storm` prints how many of the 10 names each
//! of 10 runs left held (needs `weed`: `bash scripts/ensure-seaweedfs.sh`).

use std::process::Command;
use std::time::Duration;

use lock_core::Locker;
use lock_object_store::ObjectStoreLock;
use lock_testkit::{SEAWEEDFS_ACCESS_KEY, SEAWEEDFS_SECRET_KEY, SeaweedfsServer};

/// Names per run.
const NAMES: u64 = 10;
/// Acquires per run, spread over the names.
const ACQUIRES: u64 = 300;
/// Runs.
const RUNS: u32 = 10;

fn lock(endpoint: &str, prefix: &str) -> ObjectStoreLock {
    ObjectStoreLock::builder()
        .url(format!("s3://distlock/{prefix}"))
        .endpoint(endpoint)
        .credentials(SEAWEEDFS_ACCESS_KEY, SEAWEEDFS_SECRET_KEY)
        .region("us-east-1")
        .timeout(Duration::from_secs(3))
        .build()
        .expect("a valid S3 configuration")
}

/// A number from 0 to 9,999 for acquire `i` of this process (a hash: no seeded generator).
fn micros(i: u64) -> u64 {
    let mut x = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ u64::from(std::process::id());
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    (x ^ (x >> 33)) % 10_000
}

/// The storm: every acquire dropped after 0–10 ms; the process lingers a second so that the
/// background releases it owes can run, then exits.
async fn storm(endpoint: &str, prefix: &str) {
    let lock = lock(endpoint, prefix);
    lock.check_store()
        .await
        .expect("the store writes conditionally");
    let locker = Locker::new(lock);
    let mut tasks = Vec::new();
    for i in 0..ACQUIRES {
        let locker = locker.clone();
        tasks.push(tokio::spawn(async move {
            let name = format!("n{}", i % NAMES);
            let request = locker.lock(name.as_str()).wait(Duration::from_secs(1));
            let after = Duration::from_micros(micros(i));
            drop(tokio::time::timeout(after, request.into_future()).await);
        }));
        tokio::time::sleep(Duration::from_micros(300)).await;
    }
    for task in tasks {
        task.await.expect("an acquire task");
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
}

/// How many of the names a fresh process finds held.
async fn held(endpoint: &str, prefix: &str) -> u64 {
    let locker = Locker::new(lock(endpoint, prefix));
    let mut held = 0;
    for i in 0..NAMES {
        let name = format!("n{i}");
        match locker
            .lock(name.as_str())
            .try_acquire()
            .await
            .expect("answers")
        {
            Some(guard) => guard.release().await.expect("ours"),
            None => held += 1,
        }
    }
    held
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    match (args.get(1).map(String::as_str), args.get(2), args.get(3)) {
        (Some("storm"), Some(endpoint), Some(prefix)) => storm(endpoint, prefix).await,
        (Some("check"), Some(endpoint), Some(prefix)) => {
            println!("{}", held(endpoint, prefix).await);
        }
        _ => {
            let server = SeaweedfsServer::start().expect("start seaweedfs");
            let me = std::env::current_exe().expect("this program");
            let mut per_run = Vec::new();
            for run in 0..RUNS {
                let prefix = format!("storm-{run}");
                let endpoint = server.endpoint();
                let stormed = Command::new(&me)
                    .args(["storm", &endpoint, &prefix])
                    .status()
                    .expect("the storm process");
                assert!(stormed.success(), "the storm process failed");
                let out = Command::new(&me)
                    .args(["check", &endpoint, &prefix])
                    .output()
                    .expect("the checking process");
                let held: u64 = String::from_utf8_lossy(&out.stdout)
                    .trim()
                    .parse()
                    .expect("a count");
                println!("run {run}: {held} of {NAMES} names left held");
                per_run.push(held);
            }
            println!("names left held per run: {per_run:?}");
        }
    }
}
