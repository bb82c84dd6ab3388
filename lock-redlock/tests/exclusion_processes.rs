//! Three OS processes, each its own Redlock client over the same three nodes: a
//! read-modify-write counter updated under the lock ends exact.
//!
//! The test binary re-runs itself: the parent test starts `PROCESSES` copies of this executable
//! that run only the ignored `worker_process` test, with the nodes' URLs in the environment.

mod common;

use std::time::Duration;

use common::servers::{Nodes, redlock_over};
use lock_core::Locker;

const PROCESSES: usize = 3;
const ROUNDS: i64 = 15;
const URLS_VAR: &str = "DISTLOCK_REDLOCK_TEST_WORKER_URLS";

#[tokio::test]
async fn processes_on_one_name_exclude_each_other() {
    let nodes = Nodes::start(3);
    // Bounded: all workers must finish within 90 s.
    lock_testkit::run_test_in_processes(
        "worker_process",
        &[(URLS_VAR, nodes.urls().join(","))],
        PROCESSES,
        Duration::from_secs(90),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let total = nodes.get(0, "counter").await;
    assert_eq!(
        total,
        Some((ROUNDS * PROCESSES as i64).to_string()),
        "lost updates: exclusion between processes broke"
    );
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
    let mut conn = redis::Client::open(urls[0].as_str())
        .expect("url")
        .get_multiplexed_async_connection()
        .await
        .expect("connect");
    for _ in 0..ROUNDS {
        let guard = locker
            .lock("shared")
            .fixed_ttl(Duration::from_secs(5))
            .wait(Duration::from_secs(60))
            .await
            .expect("acquire");
        let n: Option<i64> = redis::cmd("GET")
            .arg("counter")
            .query_async(&mut conn)
            .await
            .expect("GET");
        tokio::time::sleep(Duration::from_micros(200)).await;
        redis::cmd("SET")
            .arg("counter")
            .arg(n.unwrap_or(0) + 1)
            .query_async::<()>(&mut conn)
            .await
            .expect("SET");
        guard.release().await.expect("release");
    }
}
