//! Exclusion on one name, with the shared body in `lock_testkit::exclusion`: a read-modify-write
//! counter updated under the lock ends exact, and no two holders are ever inside at once,
//! whether 16 tasks over four Redlock clients on five nodes race for it or three OS processes,
//! each its own Redlock client over the same three nodes, do.
//!
//! The process test re-runs this binary: the parent starts `PROCESSES` copies that run only the
//! ignored `worker_process` test, with the nodes' URLs in the environment.

use std::time::Duration;

use lock_core::Locker;
use lock_testkit::exclusion::{self, Counter, Pause};

use crate::common::servers::{Nodes, redlock_over};

const TASKS: usize = 16;
const TASK_ROUNDS: usize = 10;
const PROCESSES: usize = 3;
const PROCESS_ROUNDS: usize = 15;
const URLS_VAR: &str = "DISTLOCK_REDLOCK_TEST_WORKER_URLS";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tasks_on_one_name_exclude_each_other() {
    let nodes = Nodes::start(5);
    // Four clients (each with its own connections to the five nodes), four tasks each.
    let lockers: Vec<_> = (0..4).map(|_| Locker::new(nodes.redlock())).collect();
    exclusion::tasks_exclude_each_other(
        &lockers,
        "counter-lock",
        Counter::at(&nodes.url(0)).await,
        TASKS,
        TASK_ROUNDS,
        Duration::from_secs(60),
    )
    .await;
    assert!(
        nodes.wait_gone(&[0, 1, 2, 3, 4], "counter-lock").await,
        "every guard released on every node"
    );
}

#[tokio::test]
async fn processes_on_one_name_exclude_each_other() {
    let nodes = Nodes::start(3);
    // Bounded: all workers must finish within 90 s.
    exclusion::processes_exclude_each_other(
        &lock_testkit::child_test!(worker_process),
        &[(URLS_VAR, nodes.urls().join(","))],
        PROCESSES,
        PROCESS_ROUNDS,
        Duration::from_secs(90),
        Counter::at(&nodes.url(0)).await,
    )
    .await;
    assert!(nodes.wait_gone(&[0, 1, 2], "shared").await);
}

/// The body of one worker process; does nothing unless started by the test above.
#[tokio::test]
#[ignore = "run as a child process by processes_on_one_name_exclude_each_other"]
async fn worker_process() {
    let Ok(urls) = std::env::var(URLS_VAR) else {
        return;
    };
    let urls: Vec<String> = urls.split(',').map(str::to_owned).collect();
    let locker = Locker::new(redlock_over(&urls, |b| b));
    exclusion::count_under_lock(
        &locker,
        "shared",
        Counter::at(&urls[0]).await,
        PROCESS_ROUNDS,
        Duration::from_secs(60),
        Pause::Sleep(Duration::from_micros(200)),
        None,
    )
    .await;
}
