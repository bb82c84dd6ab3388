//! Exclusion on one name, with the shared body in `lock_testkit::exclusion`: a read-modify-write
//! counter updated under the lock ends exact, whether 32 tasks over four lockers race for it or
//! three OS processes do.
//!
//! The process test re-runs this binary: the parent starts `PROCESSES` copies that run only the
//! ignored `worker_process` test, with the server's URL in the environment.

use std::time::Duration;

use lock_core::Locker;
use lock_redis::RedisLock;
use lock_testkit::exclusion::{self, Counter, Pause};

use crate::common::{locker_on, raw, server};

const TASKS: usize = 32;
const TASK_ROUNDS: usize = 15;
const PROCESSES: usize = 3;
const PROCESS_ROUNDS: usize = 40;
const URL_VAR: &str = "DISTLOCK_TEST_WORKER_URL";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tasks_on_one_name_exclude_each_other() {
    let server = server();
    // Four lockers (four connections), eight tasks each: contention within and across clients.
    let lockers: Vec<_> = (0..4).map(|_| locker_on(&server)).collect();
    exclusion::tasks_exclude_each_other(
        &lockers,
        "counter-lock",
        Counter::at(&server.url()).await,
        TASKS,
        TASK_ROUNDS,
        Duration::from_secs(30),
    )
    .await;
    let mut conn = raw(&server).await;
    let left: i64 = redis::cmd("EXISTS")
        .arg("counter-lock")
        .query_async(&mut conn)
        .await
        .expect("EXISTS");
    assert_eq!(left, 0, "every guard released");
}

#[tokio::test]
async fn processes_on_one_name_exclude_each_other() {
    let server = server();
    // Bounded: all workers must finish within 60 s.
    exclusion::processes_exclude_each_other(
        &lock_testkit::child_test!(worker_process),
        &[(URL_VAR, server.url())],
        PROCESSES,
        PROCESS_ROUNDS,
        Duration::from_secs(60),
        Counter::at(&server.url()).await,
    )
    .await;
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
    exclusion::count_under_lock(
        &locker,
        "shared",
        Counter::at(&url).await,
        PROCESS_ROUNDS,
        Duration::from_secs(30),
        Pause::Sleep(Duration::from_micros(200)),
        None,
    )
    .await;
}
