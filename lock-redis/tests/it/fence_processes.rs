//! A holder paused past its lease, in another OS process: `SIGSTOP`ped while it holds, a
//! successor takes the lock and writes; resumed with `SIGCONT`, the holder's fenced write is
//! refused every time, and the successor's writes all stand.

use std::process::Command;
use std::time::Duration;

use lock_core::{LockError, Locker};
use lock_redis::RedisLock;

use crate::common::{self, raw, server};

const URL_VAR: &str = "DISTLOCK_FENCE_TEST_URL";

/// Sends `signal` (`-STOP`, `-CONT`) to the one process `pid`.
fn signal(pid: u32, signal: &str) {
    let status = Command::new("kill")
        .arg(signal)
        .arg(pid.to_string())
        .status()
        .expect("kill");
    assert!(status.success(), "kill {signal} {pid}");
}

/// Polls `key` every 10 ms, at most `limit`; its value.
async fn wait_for(
    conn: &mut redis::aio::MultiplexedConnection,
    key: &str,
    limit: Duration,
) -> Option<String> {
    for _ in 0..limit.as_millis() / 10 {
        if let Some(value) = common::get(conn, key).await {
            return Some(value);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    None
}

/// The child: holds `job` with a 300 ms lease, says so, waits for `go` (it is paused
/// meanwhile), then writes `job:out` through the fence and reports what happened.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a child process of a_holder_paused_past_its_lease_is_refused"]
async fn paused_holder() {
    let url = std::env::var(URL_VAR).expect("the parent's URL");
    let locker = Locker::new(RedisLock::from_url(&url).expect("a reply"));
    let fences = RedisLock::from_url(&url).expect("a reply").fences();
    fences.load().await.expect("library");
    let guard = locker
        .lock("job")
        .fixed_ttl(Duration::from_millis(300))
        .await
        .expect("acquire");
    let fence = guard.fence().for_resource("job:out");
    let mut conn = redis::Client::open(url.as_str())
        .expect("a reply")
        .get_multiplexed_async_connection()
        .await
        .expect("a reply");
    redis::cmd("SET")
        .arg("child:token")
        .arg(fence.token)
        .exec_async(&mut conn)
        .await
        .expect("a reply");
    wait_for(&mut conn, "child:go", Duration::from_secs(60))
        .await
        .expect("go");
    let result = match fences.set(&fence, b"paused holder", None).await {
        Ok(()) => "applied".to_owned(),
        Err(LockError::Fenced { current, .. }) => format!("refused {current}"),
        Err(other) => format!("error {other}"),
    };
    redis::cmd("SET")
        .arg("child:result")
        .arg(result)
        .exec_async(&mut conn)
        .await
        .expect("a reply");
    drop(guard);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_paused_past_its_lease_is_refused() {
    let server = server();
    let mut conn = raw(&server).await;
    let locker = Locker::new(RedisLock::from_url(&server.url()).expect("a reply"));
    let fences = RedisLock::from_url(&server.url())
        .expect("a reply")
        .fences();
    for round in 0..2 {
        for key in ["child:token", "child:go", "child:result"] {
            server.command(&["DEL", key]).expect("a reply");
        }
        let mut child = lock_testkit::spawn_test_process(
            &lock_testkit::child_test!(paused_holder),
            &[(URL_VAR, server.url())],
        )
        .expect("start the holder process");
        let pid = child.id().expect("running");
        let token: u64 = wait_for(&mut conn, "child:token", Duration::from_secs(60))
            .await
            .expect("the child holds")
            .parse()
            .expect("a reply");
        signal(pid, "-STOP");
        assert!(
            common::wait_until_gone(&mut conn, "job").await,
            "the paused holder's lease expires"
        );
        let successor = locker.lock("job").await.expect("the successor");
        let fence = successor.fence().for_resource("job:out");
        assert!(fence.token > token);
        for _ in 0..3 {
            fences
                .set(&fence, b"successor", None)
                .await
                .expect("applied");
        }
        server.command(&["SET", "child:go", "1"]).expect("a reply");
        signal(pid, "-CONT");
        let result = wait_for(&mut conn, "child:result", Duration::from_secs(60))
            .await
            .expect("the child reports");
        assert_eq!(result, format!("refused {}", fence.token), "round {round}");
        assert_eq!(
            common::get(&mut conn, "job:out").await.as_deref(),
            Some("successor")
        );
        successor.release().await.expect("ours");
        let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
            .await
            .expect("the child ends")
            .expect("a reply");
        assert!(status.success());
    }
}
