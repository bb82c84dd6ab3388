//! A renewed lease outlives many TTLs on a real Redis while another process waits for it, and
//! renewal stops before the release: nothing extends the key after it.

use std::time::Duration;

use lock_core::Locker;
use lock_redis::RedisLock;

use crate::common::{self, pttl, raw, server};

const LEASE: Duration = Duration::from_millis(300);
const URL_VAR: &str = "DISTLOCK_TEST_RENEWAL_URL";

fn locker(url: &str) -> Locker {
    Locker::builder(RedisLock::from_url(url).expect("url"))
        .lease(LEASE)
        .build()
}

#[tokio::test]
async fn a_renewed_lease_outlives_many_ttls_while_another_process_waits() {
    let server = server();
    let locker = locker(&server.url());
    let mut conn = raw(&server).await;
    let guard = locker.lock("job").await.expect("free");

    let waiter = tokio::spawn(lock_testkit::run_test_in_processes(
        &lock_testkit::child_test!(waiting_process),
        &[(URL_VAR, server.url())],
        1,
        Duration::from_secs(60),
    ));

    // Hold for 5 leases. The key's TTL never exceeds one lease, yet it never runs out.
    for _ in 0..15 {
        tokio::time::sleep(LEASE / 3).await;
        let left = pttl(&mut conn, "job").await;
        assert!(
            left > 0 && left <= 300,
            "renewed, one lease at a time: {left} ms"
        );
        assert!(guard.is_held());
    }
    redis::cmd("SET")
        .arg("holder-done")
        .arg(1)
        .query_async::<()>(&mut conn)
        .await
        .expect("SET");
    guard.release().await.expect("still ours");

    waiter
        .await
        .expect("joined")
        .unwrap_or_else(|e| panic!("the waiting process: {e}"));
}

/// The second process: waits for the lock and checks it only got it after the holder finished.
#[tokio::test]
#[ignore = "run as a child process by a_renewed_lease_outlives_many_ttls_while_another_process_waits"]
async fn waiting_process() {
    let Ok(url) = std::env::var(URL_VAR) else {
        return;
    };
    let locker = locker(&url);
    let mut conn = redis::Client::open(url)
        .expect("url")
        .get_multiplexed_async_connection()
        .await
        .expect("connect");
    let guard = locker
        .lock("job")
        .wait(Duration::from_secs(30))
        .await
        .expect("acquired once released");
    let done: Option<i64> = redis::cmd("GET")
        .arg("holder-done")
        .query_async(&mut conn)
        .await
        .expect("GET");
    assert_eq!(
        done,
        Some(1),
        "granted while the renewed lease was still held"
    );
    guard.release().await.expect("ok");
}

#[tokio::test]
async fn nothing_extends_the_key_after_release() {
    let server = server();
    let locker = locker(&server.url());
    let mut conn = raw(&server).await;
    for _ in 0..5 {
        let guard = locker.lock("job").await.expect("free");
        tokio::time::sleep(LEASE / 2).await; // one renewal, and part of the next period
        guard.release().await.expect("ours");
    }
    let after_release = common::command_calls(&conn, "pexpire").await;
    assert!(after_release >= 5, "renewals happened: {after_release}");
    for _ in 0..10 {
        tokio::time::sleep(LEASE / 3).await;
        let exists: i64 = redis::cmd("EXISTS")
            .arg("job")
            .query_async(&mut conn)
            .await
            .expect("EXISTS");
        assert_eq!(exists, 0, "the released key never comes back");
    }
    assert_eq!(
        common::command_calls(&conn, "pexpire").await,
        after_release,
        "no renewal reached Redis after a release"
    );
}
