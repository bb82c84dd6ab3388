//! `release --token`: a wrong token changes nothing; the holder's token releases and wakes a
//! waiter at once; `--force` without a terminal is refused. On a single server and a cluster.

use std::time::{Duration, Instant};

use lock_core::{Backoff, Locker};
use lock_redis::RedisLock;
use lock_testkit::{RedisCluster, RedisServer};

use crate::common::{distlock, hold, locker, query, stderr, token_of};

async fn release_by_token(urls: Vec<String>) {
    let holder = locker(&urls);
    let guard = hold(&holder, "job:nightly").await;
    let token = token_of(&guard);
    let fence_key = "{job:nightly}:distlock-fence";
    let fence_before: String = query(&urls, redis::cmd("GET").arg(fence_key));

    let u = urls.clone();
    let wrong = tokio::task::spawn_blocking(move || {
        distlock(
            &u,
            &[
                "release",
                "job:nightly",
                "--token",
                "dl:0123456789abcdef0123456789abcdef",
            ],
        )
    })
    .await
    .expect("run");
    assert_eq!(wrong.status.code(), Some(1), "{}", stderr(&wrong));
    assert!(
        stderr(&wrong).contains("another token"),
        "{}",
        stderr(&wrong)
    );
    let value: Option<String> = query(&urls, redis::cmd("GET").arg("job:nightly"));
    assert_eq!(
        value.as_deref(),
        Some(token.as_str()),
        "the holder's key is untouched"
    );
    let ttl: i64 = query(&urls, redis::cmd("PTTL").arg("job:nightly"));
    assert!(ttl > 0, "its TTL too");
    let fence_after: String = query(&urls, redis::cmd("GET").arg(fence_key));
    assert_eq!(fence_before, fence_after);

    let u = urls.clone();
    let forced =
        tokio::task::spawn_blocking(move || distlock(&u, &["release", "job:nightly", "--force"]))
            .await
            .expect("run");
    assert_ne!(forced.status.code(), Some(0));
    assert!(stderr(&forced).contains("terminal"), "{}", stderr(&forced));

    // A waiter whose polling alone would take 10 s: waking sooner means it was announced.
    let lock = {
        let b = RedisLock::builder();
        let b = if urls.len() > 1 {
            b.cluster_urls(urls.clone())
        } else {
            b.url(urls[0].clone())
        };
        b.build().expect("lock")
    };
    let waiter = Locker::builder(lock)
        .backoff(Backoff::new(
            Duration::from_secs(10),
            Duration::from_secs(10),
        ))
        .build();
    let waiting = tokio::spawn(async move {
        let asked = Instant::now();
        let guard = waiter
            .lock("job:nightly")
            .wait(Duration::from_secs(60))
            .acquire()
            .await
            .expect("granted after the release");
        (asked, Instant::now(), guard)
    });
    tokio::time::sleep(Duration::from_millis(800)).await; // the waiter subscribes and sleeps
    let u = urls.clone();
    let t = token.clone();
    let released = tokio::task::spawn_blocking(move || {
        distlock(&u, &["release", "job:nightly", "--token", &t])
    })
    .await
    .expect("run");
    let released_at = Instant::now();
    assert_eq!(released.status.code(), Some(0), "{}", stderr(&released));
    let (_, granted, next) = waiting.await.expect("waiter");
    assert!(
        granted.saturating_duration_since(released_at) < Duration::from_secs(5),
        "the waiter was woken, not left to its 10 s backoff"
    );
    assert_ne!(token_of(&next), token);
    assert!(
        guard.release().await.is_err(),
        "the old guard no longer owns it"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_server() {
    let server = RedisServer::start().expect("redis-server");
    release_by_token(vec![server.url()]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster() {
    let cluster = RedisCluster::start().expect("cluster");
    release_by_token(cluster.urls()).await;
}
