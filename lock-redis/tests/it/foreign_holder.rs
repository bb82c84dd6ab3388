//! A waiter behind a holder that never announces its release: another OS process holds the
//! name the way redis-py's `Lock` does (`SET name <uuid4 hex> NX PX 30000`, released 300 ms
//! later with a compare-and-delete script, never a `PUBLISH`). The distlock waiter must notice
//! the release by polling (within its backoff's 100 ms ceiling), not sleep for the holder's
//! 30 s TTL or until its own deadline. And behind a distlock holder it still waits for the
//! announcement without polling.
//!
//! The test binary re-runs itself: the parent starts a copy that runs only the ignored
//! `redis_py_style_holder` test, with the server's URL in the environment.

use std::time::Duration;

use lock_core::backend::{Attempt, Lock};
use lock_core::{Locker, Token};
use lock_redis::RedisLock;

use crate::common::{self, raw, server};

const URL_VAR: &str = "DISTLOCK_TEST_FOREIGN_URL";
const NAME: &str = "resource";
/// How long the foreign holder keeps the lock before it releases.
const HOLD: Duration = Duration::from_millis(300);

/// redis-py's release: compare-and-delete of its own token, and nothing else.
const REDIS_PY_RELEASE: &str = "if redis.call('get', KEYS[1]) == ARGV[1] then \
     return redis.call('del', KEYS[1]) else return 0 end";

/// One attempt at the held `NAME`: whether the acquire reply says its holder announces
/// (`None` if it was granted, which these tests never expect).
async fn holder_announces(lock: &RedisLock) -> Option<bool> {
    let token = Token::generate().expect("rng");
    match lock
        .try_acquire(NAME, token, Duration::from_secs(5))
        .await
        .expect("ok")
    {
        Attempt::Busy { announces, .. } => Some(announces),
        Attempt::Acquired(_) => None,
    }
}

/// A uuid4 rendered as redis-py renders its tokens (`uuid.uuid4().hex`).
fn uuid4_hex() -> String {
    let mut bytes = *Token::generate().expect("os rng").as_bytes();
    bytes[6] = 0x40 | (bytes[6] & 0x0f);
    bytes[8] = 0x80 | (bytes[8] & 0x3f);
    Token::from_bytes(bytes).to_hex().as_str().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_polls_a_holder_that_never_announces() {
    let server = server();
    let mut conn = raw(&server).await;
    let holder = tokio::spawn(lock_testkit::run_test_in_processes(
        &lock_testkit::child_test!(redis_py_style_holder),
        &[(URL_VAR, server.url())],
        1,
        Duration::from_secs(30),
    ));
    // Bounded: the child has the lock within 10 s or the test fails.
    let mut polls = 0;
    while common::get(&mut conn, NAME).await.is_none() {
        polls += 1;
        assert!(polls < 1_000, "the foreign holder never took the lock");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    // The acquire script itself tells a foreign holder from ours.
    let lock = RedisLock::from_url(&server.url()).expect("url");
    assert_eq!(
        holder_announces(&lock).await,
        Some(false),
        "a uuid4 holder does not announce"
    );

    // Before the change this waiter slept until its own 20 s deadline (the holder's TTL is
    // 30 s), then got in at the last try. Now it polls and gets in shortly after the release.
    let locker = Locker::new(lock);
    let started = std::time::Instant::now();
    let guard = tokio::time::timeout(
        Duration::from_secs(10),
        locker.lock(NAME).wait(Duration::from_secs(20)).acquire(),
    )
    .await
    .expect("got in by polling, long before the 20 s wait ran out")
    .expect("acquired after the foreign release");
    // A figure, not an assertion: the holder released about 300 ms after it took the lock.
    println!("acquired {:?} after the waiter started", started.elapsed());
    guard.release().await.expect("ours");
    holder
        .await
        .expect("joined")
        .unwrap_or_else(|e| panic!("{e}"));
}

/// The body of the foreign holder process; does nothing unless started by the test above.
#[tokio::test]
#[ignore = "run as a child process by a_waiter_polls_a_holder_that_never_announces"]
async fn redis_py_style_holder() {
    let Ok(url) = std::env::var(URL_VAR) else {
        return;
    };
    let mut conn = redis::Client::open(url)
        .expect("url")
        .get_multiplexed_async_connection()
        .await
        .expect("connect");
    let token = uuid4_hex();
    let set: Option<String> = redis::cmd("SET")
        .arg(NAME)
        .arg(&token)
        .arg("NX")
        .arg("PX")
        .arg(30_000)
        .query_async(&mut conn)
        .await
        .expect("SET");
    assert_eq!(set.as_deref(), Some("OK"), "the name was free");
    tokio::time::sleep(HOLD).await;
    let released: i64 = redis::Script::new(REDIS_PY_RELEASE)
        .key(NAME)
        .arg(&token)
        .invoke_async(&mut conn)
        .await
        .expect("release");
    assert_eq!(released, 1, "released its own lock");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_distlock_holder_is_known_to_announce() {
    let server = server();
    let holder_side = Locker::new(RedisLock::from_url(&server.url()).expect("url"));
    let guard = holder_side
        .lock(NAME)
        .fixed_ttl(Duration::from_secs(30))
        .await
        .expect("free");
    for fencing in [true, false] {
        let lock = RedisLock::builder()
            .url(server.url())
            .fencing(fencing)
            .build()
            .expect("url");
        assert_eq!(
            holder_announces(&lock).await,
            Some(true),
            "fencing({fencing}): a distlock holder announces"
        );
    }
    guard.release().await.expect("ours");
}
