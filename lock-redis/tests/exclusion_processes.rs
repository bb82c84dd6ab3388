//! Three OS processes on one name: a read-modify-write counter updated under the lock ends exact.
//!
//! The test binary re-runs itself: the parent test starts `PROCESSES` copies of this executable
//! that run only the ignored `worker_process` test, with the server's URL in the environment.

mod common;

use std::time::Duration;

use common::{locker_on, raw, server};
use lock_core::Locker;
use lock_redis::RedisLock;

const PROCESSES: usize = 3;
const ROUNDS: i64 = 40;
const URL_VAR: &str = "DISTLOCK_TEST_WORKER_URL";

#[tokio::test]
async fn processes_on_one_name_exclude_each_other() {
    let server = server();
    // Bounded: all workers must finish within 60 s.
    lock_testkit::run_test_in_processes(
        "worker_process",
        &[(URL_VAR, server.url())],
        PROCESSES,
        Duration::from_secs(60),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let mut conn = raw(&server).await;
    let total: i64 = redis::cmd("GET")
        .arg("counter")
        .query_async(&mut conn)
        .await
        .expect("GET");
    assert_eq!(
        total,
        ROUNDS * PROCESSES as i64,
        "lost updates: exclusion between processes broke"
    );
    // Sanity that the parent's own locker agrees the lock is free.
    assert!(
        locker_on(&server)
            .lock("shared")
            .try_acquire()
            .await
            .expect("ok")
            .is_some()
    );
}

/// The body of one worker process; does nothing unless started by the test above.
#[tokio::test]
#[ignore = "run as a child process by processes_on_one_name_exclude_each_other"]
async fn worker_process() {
    let Ok(url) = std::env::var(URL_VAR) else {
        return;
    };
    let locker = Locker::new(RedisLock::from_url(&url).expect("url"));
    let mut conn = redis::Client::open(url)
        .expect("url")
        .get_multiplexed_async_connection()
        .await
        .expect("connect");
    for _ in 0..ROUNDS {
        let guard = locker
            .lock("shared")
            .fixed_ttl(Duration::from_secs(5))
            .wait(Duration::from_secs(30))
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
