//! RedisLock through Sentinel on real processes (a primary, a replica, three sentinels): the
//! lock keeps working against the new master after the primary is killed, renewed leases carry
//! on, and the release subscriber follows the master so waiters are still woken.

#![cfg(feature = "sentinel")]

use std::time::Duration;

use lock_core::{Backoff, Locker};
use lock_redis::{RedisLock, ReplicaPolicy};
use lock_testkit::RedisSentinelSet;

use crate::common::{Server, on_both_servers};

fn sentinel_lock(set: &RedisSentinelSet) -> RedisLock {
    RedisLock::builder()
        .sentinel(set.sentinel_urls(), set.master_name())
        .connect_timeout(Duration::from_secs(2))
        .command_timeout(Duration::from_secs(1))
        // Grants and renewals wait for the replica, so they survive the failover; `Warn`, because
        // after it the promoted master has no replica left and `Fail` would refuse every grant
        // (safety over availability, by design).
        .wait_for_replicas(1, Duration::from_millis(200), ReplicaPolicy::Warn)
        // This file's other tests follow the failover at once; the grace period after it is
        // `a_failover_to_a_lagging_replica_grants_nothing_during_the_grace`'s subject.
        .grace(Duration::ZERO)
        .build()
        .expect("sentinel URLs")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failover_to_a_lagging_replica_grants_nothing_during_the_grace() {
    const LEASE: Duration = Duration::from_secs(6);
    let mut set = RedisSentinelSet::start().expect("primary, replica and sentinels");
    let lock = || {
        RedisLock::builder()
            .sentinel(set.sentinel_urls(), set.master_name())
            .connect_timeout(Duration::from_secs(2))
            .command_timeout(Duration::from_secs(1))
            .grace(LEASE)
            .build()
            .expect("sentinel URLs")
    };
    let holder = Locker::new(lock());
    let contender = lock();
    lock_core::backend::Lock::ping(&contender)
        .await
        .expect("the contender knows the old master");

    // The replica is stopped and its link cut (a stopped process still receives into its
    // socket buffer), so the grant never reaches it.
    let replica = 1 - set.primary_index().expect("primary");
    set.servers()[replica].pause().expect("SIGSTOP the replica");
    set.primary_server()
        .expect("primary")
        .command(&["CLIENT", "KILL", "TYPE", "replica"])
        .expect("cut the replication link");
    let held = holder
        .lock("job")
        .fixed_ttl(LEASE)
        .await
        .expect("granted on the old master");
    set.kill_primary().expect("SIGKILL the primary");
    set.servers()[replica]
        .resume()
        .expect("SIGCONT the replica");
    let promoted = set.wait_for_failover().expect("the replica was promoted");
    let mut conn = redis::Client::open(format!("redis://{promoted}/"))
        .expect("url")
        .get_multiplexed_async_connection()
        .await
        .expect("connect to the new master");
    let exists: bool = redis::cmd("EXISTS")
        .arg("job")
        .query_async(&mut conn)
        .await
        .expect("EXISTS");
    assert!(!exists, "the promoted replica lacks the grant");

    // The contender saw the master change: nothing until its grace (the lease) has run out,
    // so its grant begins after the holder's lease has ended.
    let got = Locker::new(contender)
        .lock("job")
        .fixed_ttl(LEASE)
        .wait(LEASE * 4)
        .await
        .expect("granted after the grace");
    let got_from = got.valid_until() - LEASE;
    assert!(
        got_from >= held.valid_until(),
        "two valid leases at once: the grant began {:?} before the holder's lease ended",
        held.valid_until() - got_from
    );
    got.release().await.expect("released");
}

async fn the_lock_follows_a_sentinel_failover(server: Server) {
    let mut set = server.sentinel_set();
    // The lease must outlast the failover (~3–5 s here) for renewal to carry it over.
    let locker = Locker::builder(sentinel_lock(&set))
        .lease(Duration::from_secs(8))
        .build();
    // Polling alone would take 10 s per try: a faster grant after the failover is a wake-up.
    let waiter_side = Locker::builder(sentinel_lock(&set))
        .backoff(Backoff::new(
            Duration::from_secs(10),
            Duration::from_secs(10),
        ))
        .build();

    let held = locker
        .lock("job")
        .await
        .expect("granted through the sentinels' master");
    let fence_before = held.fencing_token();
    let waiter = tokio::spawn(async move {
        waiter_side
            .lock("job")
            .wait(Duration::from_secs(60))
            .await
            .map(|g| g.fencing_token())
    });
    tokio::time::sleep(Duration::from_millis(300)).await;

    let old = set.kill_primary().expect("SIGKILL the primary");
    let new = set
        .wait_for_failover()
        .expect("the sentinels promoted the replica");
    assert_ne!(old, new);

    // New grants work against the new master (the first attempts may meet the dead one).
    let other = locker
        .lock("other")
        .wait(Duration::from_secs(30))
        .await
        .expect("locking works after the failover");
    other.release().await.expect("ours");

    // The lease was confirmed by the replica; a renewal on the new master moves its validity
    // past what the pre-crash renewals gave it.
    let promoted_at = tokio::time::Instant::now();
    let mut renewed = false;
    for _ in 0..150 {
        if held.valid_until() > promoted_at + Duration::from_secs(7) {
            renewed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(renewed && held.is_held(), "renewed on the new master");
    held.release().await.expect("released on the new master");
    let next = tokio::time::timeout(Duration::from_secs(9), waiter)
        .await
        .expect("woken by the new master's announcement, before a 10 s poll")
        .expect("no panic")
        .expect("acquired");
    assert!(
        next > fence_before,
        "fencing kept increasing across the failover"
    );
}

async fn read_write_locks_and_semaphores_work_through_sentinel(server: Server) {
    let set = server.sentinel_set();
    let locker = Locker::new(sentinel_lock(&set));
    // A second client stands in for another process: it is woken by the master's announcement.
    let other = Locker::builder(sentinel_lock(&set))
        .backoff(Backoff::new(
            Duration::from_secs(10),
            Duration::from_secs(10),
        ))
        .build();

    let first = locker.read("doc").await.expect("granted");
    let second = other.read("doc").await.expect("readers share");
    let writer = tokio::spawn({
        let locker = locker.clone();
        async move {
            locker
                .write("doc")
                .wait(Duration::from_secs(20))
                .await
                .map(|guard| guard.fencing_token())
        }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        other
            .read("doc")
            .try_acquire()
            .await
            .expect("answers")
            .is_none(),
        "a waiting writer holds new readers back"
    );
    first.release().await.expect("ours");
    second.release().await.expect("ours");
    let fence = tokio::time::timeout(Duration::from_secs(5), writer)
        .await
        .expect("the last reader's release woke the writer")
        .expect("no panic")
        .expect("granted");
    assert!(fence > 0);

    let held = locker.semaphore("pool", 3).permits(2).await.expect("free");
    assert_eq!(
        other
            .semaphore("pool", 3)
            .available()
            .await
            .expect("answers"),
        1
    );
    held.release().await.expect("ours");
    assert_eq!(
        other
            .semaphore("pool", 3)
            .available()
            .await
            .expect("answers"),
        3
    );
}

on_both_servers!(
    the_lock_follows_a_sentinel_failover,
    read_write_locks_and_semaphores_work_through_sentinel,
);
