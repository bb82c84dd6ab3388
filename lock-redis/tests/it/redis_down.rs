//! Redis killed or hanging: a typed error within the configured timeouts, no hang, no panic;
//! locking works again once the server is back.

use std::time::{Duration, Instant};

use lock_core::{LockError, TimeoutPhase};

use crate::common::{locker_on, server};

/// The tests' lock uses 500 ms connect and command timeouts; allow generous slack for a busy CI
/// machine, while still proving the call does not hang.
const BOUND: Duration = Duration::from_secs(5);

#[tokio::test]
async fn killed_redis_gives_a_typed_error_and_recovers() {
    let mut server = server();
    let locker = locker_on(&server);
    locker
        .lock("a")
        .try_acquire()
        .await
        .expect("up")
        .expect("free")
        .release()
        .await
        .expect("ok");

    server.stop();
    let started = Instant::now();
    let err = locker
        .lock("a")
        .try_acquire()
        .await
        .expect_err("redis is down");
    assert!(started.elapsed() < BOUND, "took {:?}", started.elapsed());
    assert!(
        matches!(
            err,
            LockError::Backend {
                retryable: true,
                ..
            } | LockError::Timeout { .. }
        ),
        "a retryable backend error, got {err:?}"
    );
    // A wait retries while the wait lasts, then reports the backend's error, not a lock timeout.
    let err = locker
        .lock("a")
        .wait(Duration::from_millis(300))
        .await
        .expect_err("still down");
    assert!(
        err.is_retryable()
            && !matches!(
                err,
                LockError::Timeout {
                    phase: TimeoutPhase::Wait,
                    ..
                }
            ),
        "{err:?}"
    );

    server.start_again().expect("restart");
    let guard = locker
        .lock("a")
        .wait(Duration::from_secs(5))
        .await
        .expect("works again once Redis is back");
    guard.release().await.expect("ok");
}

#[tokio::test]
async fn hanging_redis_times_out_and_recovers() {
    let server = server();
    let locker = locker_on(&server);
    let held = locker.lock("a").await.expect("free");
    server.pause().expect("SIGSTOP");
    let started = Instant::now();
    let err = locker
        .lock("b")
        .try_acquire()
        .await
        .expect_err("redis hangs");
    assert!(started.elapsed() < BOUND, "took {:?}", started.elapsed());
    assert!(
        matches!(
            err,
            LockError::Timeout {
                phase: TimeoutPhase::Command | TimeoutPhase::Connect,
                ..
            }
        ),
        "{err:?}"
    );
    server.resume().expect("SIGCONT");
    held.release().await.expect("works again after the pause");
}

#[tokio::test]
async fn a_wrong_password_is_not_retryable() {
    let server = lock_testkit::RedisServer::builder()
        .password("s3cret")
        .start()
        .expect("server");
    let url = server.url().replace("s3cret", "wrong");
    let locker = lock_core::Locker::new(lock_redis::RedisLock::from_url(&url).expect("url parses"));
    let started = Instant::now();
    let err = locker
        .lock("a")
        .wait(Duration::from_secs(30))
        .await
        .expect_err("wrong password");
    assert!(
        matches!(
            err,
            LockError::Backend {
                retryable: false,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(
        started.elapsed() < BOUND,
        "returned at once, not after the 30 s wait"
    );
    // The start-up check says so too, for good.
    let err = locker.ping().await.expect_err("wrong password");
    assert!(!err.is_retryable(), "{err:?}");
    // The right password works.
    let locker =
        lock_core::Locker::new(lock_redis::RedisLock::from_url(&server.url()).expect("url"));
    locker.ping().await.expect("authenticated");
    locker
        .lock("a")
        .await
        .expect("authenticated")
        .release()
        .await
        .expect("ok");
}

/// "The store is unreachable" is bounded on its own: a wait of an hour, or none at all, ends
/// with the backend's error once failures have gone on for `retry_errors_for`.
#[tokio::test]
async fn a_long_wait_for_a_dead_redis_ends_at_the_retry_budget() {
    let mut server = server();
    let locker = locker_on(&server);
    locker.ping().await.expect("up");
    server.stop();
    let err = locker
        .ping()
        .await
        .expect_err("ping tells a dead server at start-up");
    assert!(err.is_retryable(), "{err:?}");
    for request in [
        locker.lock("a").wait(Duration::from_secs(3_600)),
        locker.lock("a").wait_forever(),
    ] {
        let started = Instant::now();
        // Before the budget existed, this hung for the whole hour (or forever).
        let err = tokio::time::timeout(
            Duration::from_secs(30),
            request.retry_errors_for(Duration::from_secs(1)).acquire(),
        )
        .await
        .expect("returned within the retry budget, not the wait")
        .expect_err("redis is down");
        assert!(
            started.elapsed() >= Duration::from_secs(1),
            "retried for the budget first: {:?}",
            started.elapsed()
        );
        assert!(
            err.is_retryable()
                && !matches!(
                    err,
                    LockError::Timeout {
                        phase: TimeoutPhase::Wait,
                        ..
                    }
                ),
            "the backend's own error: {err:?}"
        );
    }
    server.start_again().expect("restart");
    locker.ping().await.expect("up again");
}
