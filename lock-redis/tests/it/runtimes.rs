//! One `Locker` over one `RedisLock`, used from several tokio runtimes in sequence and at once
//! (every `#[tokio::test]` has its own runtime, and so do services that build one per
//! component): renewal and release wake-ups work on each, also after the runtime that first
//! used the lock — and made its connection and its subscriber — is gone.
//!
//! Real time: the lease is short and each hold is several leases long, so a lease that is not
//! renewed is gone by the check. The holder a waiter waits behind keeps a 30 s TTL and the
//! waiter never polls (it waits for the announcement), so only a working wake-up lets it in
//! within 10 s.

use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use lock_core::{Backoff, Locker};
use lock_redis::RedisLock;
use lock_testkit::RedisServer;

use crate::common::{get, raw, server, token_of};

const LEASE: Duration = Duration::from_millis(600);
const HOLD: Duration = Duration::from_millis(2_000);
/// Full-jitter polling up to an hour: a poll lands within a 10 s wait 0.3 % of the time.
const POLL: Duration = Duration::from_secs(3_600);

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
}

/// The locker shared by every runtime: a renewed lease of 600 ms, and polling so slow that a
/// waiter only gets in early when it is woken.
fn shared_locker(server: &RedisServer) -> Locker {
    Locker::builder(RedisLock::from_url(&server.url()).expect("url"))
        .lease(LEASE)
        .backoff(Backoff::new(POLL, POLL))
        .build()
}

/// On the current runtime: a renewed lease outlives several leases, and a waiter behind a
/// holder in another client is woken by its release.
async fn renews_and_wakes(locker: &Locker, server: &RedisServer, name: &str) {
    let mut conn = raw(server).await;
    let guard = locker.lock(format!("{name}:renewed")).await.expect("free");
    tokio::time::sleep(HOLD).await;
    assert!(guard.is_held(), "{} was not renewed", guard.name());
    assert_eq!(
        get(&mut conn, guard.name()).await,
        Some(token_of(&guard)),
        "{} is no longer in Redis",
        guard.name()
    );
    guard.release().await.expect("released while ours");

    // Another client (its own RedisLock) holds with a 30 s TTL and releases after 300 ms.
    let other = Locker::new(RedisLock::from_url(&server.url()).expect("url"));
    let held = other
        .lock(format!("{name}:woken"))
        .fixed_ttl(Duration::from_secs(30))
        .await
        .expect("free");
    // Without a wake-up the waiter would sleep until its own deadline, try once more, and get
    // in then: bound it well below that.
    let waiter = tokio::time::timeout(
        Duration::from_secs(10),
        locker
            .lock(format!("{name}:woken"))
            .wait(Duration::from_secs(60))
            .acquire(),
    );
    let release = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        held.release().await.expect("ours");
    };
    let (acquired, ()) = tokio::join!(waiter, release);
    acquired
        .expect("woken by the release announcement, long before its 60 s wait ran out")
        .expect("acquired")
        .release()
        .await
        .expect("ours");
}

#[test]
fn runtimes_in_sequence_each_renew_and_wake() {
    let server = server();
    let locker = shared_locker(&server);
    for round in 0..3 {
        let rt = runtime();
        rt.block_on(renews_and_wakes(&locker, &server, &format!("round{round}")));
        drop(rt);
    }
}

#[test]
fn runtimes_at_once_each_renew_and_wake() {
    let server = Arc::new(server());
    let locker = shared_locker(&server);
    // The first runtime uses the lock first and ends first: the second must not depend on it.
    let started = Arc::new(Barrier::new(2));
    let first = {
        let (locker, server, started) = (locker.clone(), Arc::clone(&server), Arc::clone(&started));
        thread::spawn(move || {
            runtime().block_on(async {
                let _warm = locker.lock("first:warm").await.expect("free");
                started.wait();
                renews_and_wakes(&locker, &server, "first").await;
            });
        })
    };
    let second = {
        let server = Arc::clone(&server);
        thread::spawn(move || {
            started.wait();
            runtime().block_on(async {
                renews_and_wakes(&locker, &server, "second").await;
                // The first runtime is gone by now (or soon): do it all again without it.
                tokio::time::sleep(HOLD).await;
                renews_and_wakes(&locker, &server, "second:again").await;
            });
        })
    };
    first.join().expect("first runtime passed");
    second.join().expect("second runtime passed");
}
