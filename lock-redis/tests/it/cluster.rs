//! RedisLock on a real Redis Cluster (3 masters + 3 replicas): names over many slots, exclusion,
//! sharded wake-ups, resharding while locks are held and waited for, and failovers — graceful,
//! and a master killed, with the double grants it causes measured with and without `WAIT`.

#![cfg(feature = "cluster")]

use std::time::{Duration, Instant};

use lock_core::Locker;
use lock_redis::{RedisLock, ReplicaPolicy, key_slot};
use lock_testkit::RedisCluster;
use lock_testkit::exclusion::{self, Counter};

use crate::common::{Server, on_both_servers, slow_polling};

fn cluster_lock(cluster: &RedisCluster) -> RedisLock {
    RedisLock::builder()
        .cluster_urls(cluster.urls())
        .connect_timeout(Duration::from_secs(3))
        .command_timeout(Duration::from_secs(2))
        .build()
        .expect("cluster URLs")
}

async fn cluster_conn(cluster: &RedisCluster) -> redis::cluster_async::ClusterConnection {
    redis::cluster::ClusterClient::new(cluster.urls())
        .expect("urls")
        .get_async_connection()
        .await
        .expect("connect")
}

/// The node index that serves `key` now.
fn node_of(cluster: &RedisCluster, key: &str) -> usize {
    cluster
        .master_for_slot(key_slot(key))
        .expect("a master serves the slot")
}

async fn names_over_many_slots_lock_on_their_own_masters(server: Server) {
    let cluster = server.cluster();
    let lock = cluster_lock(&cluster);
    let locker = Locker::new(cluster_lock(&cluster));
    let other = Locker::new(cluster_lock(&cluster));
    let names: Vec<String> = (0..120)
        .map(|i| format!("order:{i}"))
        .chain(["{tenant:7}:job".into(), "a}b".into()])
        .collect();
    let mut masters_used = std::collections::HashSet::new();
    for name in &names {
        let guard = locker
            .lock(name.as_str())
            .fixed_ttl(Duration::from_secs(30))
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let node = node_of(&cluster, name);
        masters_used.insert(node);
        let stored = cluster.nodes()[node]
            .command(&["GET", name])
            .expect("GET on the slot's master");
        assert_eq!(
            stored,
            lock_redis::token_value(guard.lease().token()).as_str(),
            "{name} lives on its slot's master"
        );
        let fence = cluster.nodes()[node]
            .command(&["GET", &lock.fence_key(name)])
            .expect("GET fence");
        assert_eq!(
            fence.parse::<u64>().ok(),
            Some(guard.fencing_token()),
            "the fencing counter sits on the same node"
        );
        assert!(
            other
                .lock(name.as_str())
                .try_acquire()
                .await
                .expect("ok")
                .is_none(),
            "{name} excludes another client"
        );
        guard.release().await.expect("ok");
    }
    assert_eq!(masters_used.len(), 3, "the names spread over every master");
}

async fn tasks_exclude_each_other_on_a_cluster(server: Server) {
    let cluster = server.cluster();
    let locker = Locker::new(cluster_lock(&cluster));
    // 16 tasks on one locker, 10 rounds each: 160 updates, none lost. The counter shares the
    // lock's hash tag, so it lives on the lock's master.
    exclusion::tasks_exclude_each_other(
        &[locker],
        "{shared}:lock",
        Counter::new(cluster_conn(&cluster).await, "{shared}:count"),
        16,
        10,
        Duration::from_secs(60),
    )
    .await;
}

async fn releases_wake_waiters_over_sharded_pubsub(server: Server) {
    let cluster = server.cluster();
    let (holder_side, waiter_side) = (
        slow_polling(cluster_lock(&cluster)),
        slow_polling(cluster_lock(&cluster)),
    );
    let channel = cluster_lock(&cluster).release_channel("hot");
    let holder = holder_side.lock("hot").await.expect("free");
    let waiters: Vec<_> = (0..20)
        .map(|_| {
            let locker = waiter_side.clone();
            tokio::spawn(async move {
                let guard = locker
                    .lock("hot")
                    .wait(Duration::from_secs(60))
                    .await
                    .expect("acquired");
                guard.release().await.expect("ok");
            })
        })
        .collect();
    let node = node_of(&cluster, &channel);
    let mut subscribers = String::new();
    for _ in 0..100 {
        subscribers = cluster.nodes()[node]
            .command(&["PUBSUB", "SHARDNUMSUB", &channel])
            .expect("SHARDNUMSUB");
        if subscribers.ends_with("\n1") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        subscribers.ends_with("\n1"),
        "one sharded subscription on the slot's node for 20 waiters: {subscribers:?}"
    );
    let released = Instant::now();
    holder.release().await.expect("ours");
    for waiter in waiters {
        tokio::time::timeout(Duration::from_secs(30), waiter)
            .await
            .expect("woken, not polled")
            .expect("no panic");
    }
    assert!(
        released.elapsed() < Duration::from_secs(10),
        "announcements, not 10 s polls: {:?}",
        released.elapsed()
    );
}

async fn locks_survive_a_slot_migration_while_held_and_waited_for(server: Server) {
    let cluster = server.cluster();
    let locker = Locker::new(cluster_lock(&cluster));
    let waiter_side = Locker::new(cluster_lock(&cluster));
    let name = "{moving}:order:1";
    let slot = key_slot(name);
    let from = cluster.master_for_slot(slot).expect("master");
    let to = *cluster
        .masters()
        .iter()
        .find(|m| **m != from)
        .expect("another master");

    let held = locker.lock(name).await.expect("free"); // renewed
    let waiter = tokio::spawn(async move {
        waiter_side
            .lock(name)
            .wait(Duration::from_secs(60))
            .await
            .map(|g| g.fencing_token())
    });
    let migration = cluster.begin_migration(slot, from, to).expect("begin");
    // While the slot is MIGRATING/IMPORTING, a *new* lock's keys exist nowhere yet, and Redis
    // Cluster answers TRYAGAIN to multi-key writes on them: the grant waits for the move.
    let newcomer = {
        let locker = locker.clone();
        tokio::spawn(async move {
            locker
                .lock("{moving}:order:2")
                .fixed_ttl(Duration::from_secs(30))
                .wait(Duration::from_secs(60))
                .await
        })
    };
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(held.is_held(), "renewal goes on while the slot migrates");
    cluster.migrate_keys(&migration).expect("move the keys");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(held.is_held(), "renewal follows the moved key (ASK)");
    cluster.finish_migration(migration).expect("finish");
    assert_eq!(cluster.master_for_slot(slot).expect("master"), to);
    let during = tokio::time::timeout(Duration::from_secs(60), newcomer)
        .await
        .expect("in time")
        .expect("no panic")
        .expect("granted once the slot moved");
    let held_fence = held.fencing_token();
    held.release().await.expect("release on the new master");
    let next = tokio::time::timeout(Duration::from_secs(30), waiter)
        .await
        .expect("in time")
        .expect("no panic")
        .expect("acquired");
    assert!(next > held_fence, "fencing kept increasing across the move");
    during.release().await.expect("ok");
}

async fn a_lock_is_released_while_its_slot_migrates(server: Server) {
    let cluster = server.cluster();
    let locker = Locker::new(cluster_lock(&cluster));
    let name = "{moving}:order:3";
    let slot = key_slot(name);
    let from = cluster.master_for_slot(slot).expect("master");
    let to = *cluster
        .masters()
        .iter()
        .find(|m| **m != from)
        .expect("another master");
    let held = locker
        .lock(name)
        .fixed_ttl(Duration::from_secs(30))
        .await
        .expect("free");
    let migration = cluster.begin_migration(slot, from, to).expect("begin");
    held.release()
        .await
        .expect("released mid-migration, not TRYAGAIN, and still ours");
    cluster.finish_migration(migration).expect("finish");
}

async fn a_graceful_failover_keeps_held_locks_and_waiters_live(server: Server) {
    let cluster = server.cluster();
    let locker = Locker::builder(cluster_lock(&cluster))
        .lease(Duration::from_secs(3))
        .build();
    let waiter_side = Locker::new(cluster_lock(&cluster));
    let name = "failover:order:7";
    let master = node_of(&cluster, name);
    let replica = cluster.replica_of(master).expect("replica");
    let held = locker.lock(name).await.expect("free");
    let waiter = tokio::spawn(async move {
        waiter_side
            .lock(name)
            .wait(Duration::from_secs(60))
            .await
            .map(|g| g.fencing_token())
    });
    cluster.failover(replica).expect("CLUSTER FAILOVER");
    assert_eq!(
        node_of(&cluster, name),
        replica,
        "the replica serves the slot now"
    );
    tokio::time::sleep(Duration::from_secs(4)).await; // past one lease: only renewal on the new master keeps it
    assert!(held.is_held(), "renewed on the promoted replica");
    held.release().await.expect("release after failover");
    tokio::time::timeout(Duration::from_secs(30), waiter)
        .await
        .expect("in time")
        .expect("no panic")
        .expect("the waiter got in");
}

/// Grants up to 100 names of one master with a 30 s TTL, SIGKILLs that master, waits for its
/// replica to take over, and counts how many of the granted names a second client can take while
/// the first still holds them. With `lagging`, the replica is stalled behind 32 MB of replication
/// stream when the grants are made, so they exist only in the dead master's memory and the
/// replica is promoted without them: the worst case of asynchronous replication. Returns
/// (granted, granted twice, asked).
async fn double_grants_after_a_master_is_killed(
    wait_for: Option<u32>,
    lagging: bool,
) -> (usize, usize, usize) {
    let mut cluster = RedisCluster::start().expect("cluster");
    let mut builder = RedisLock::builder()
        .cluster_urls(cluster.urls())
        .command_timeout(Duration::from_secs(2));
    if let Some(n) = wait_for {
        builder = builder.wait_for_replicas(n, Duration::from_millis(100), ReplicaPolicy::Fail);
    }
    let first = Locker::new(builder.build().expect("urls"));
    let victim = cluster.masters()[0];
    let replica = cluster.replica_of(victim).expect("replica");
    let names: Vec<String> = (0..2_000)
        .map(|i| format!("victim:{i}"))
        .filter(|n| node_of(&cluster, n) == victim)
        .take(100)
        .collect();
    if lagging {
        // Stall the replica and push more through the replication link than the kernel's socket
        // buffers hold: the grants that follow then wait in the master's own output buffer, and
        // die with it.
        cluster.nodes()[replica]
            .server()
            .pause()
            .expect("SIGSTOP the replica");
        let filler = "x".repeat(4 << 20);
        for (i, key) in names.iter().take(8).enumerate() {
            cluster.nodes()[victim]
                .command(&["SET", &format!("{{{key}}}:filler:{i}"), &filler])
                .expect("filler");
        }
    }
    let mut held = Vec::new();
    for name in &names {
        if let Ok(guard) = first
            .lock(name.as_str())
            .fixed_ttl(Duration::from_secs(30))
            .wait(Duration::ZERO)
            .await
        {
            held.push(guard);
        }
    }
    cluster.kill(victim);
    if lagging {
        cluster.nodes()[replica].server().resume().expect("SIGCONT");
    }
    cluster
        .wait_for_failover(key_slot(&names[0]))
        .expect("the replica took over");
    let second = Locker::new(cluster_lock(&cluster));
    let mut doubles = 0;
    for guard in &held {
        if let Ok(Some(again)) = second.lock(guard.name()).try_acquire().await {
            doubles += 1;
            drop(again.leak());
        }
    }
    let granted = held.len();
    // Leave the first client's leases to expire: releasing them would hide nothing, but the
    // point is that it still believes it holds them.
    for guard in held {
        drop(guard.leak());
    }
    (granted, doubles, names.len())
}

/// `WAIT` off or on, the replica in sync or lagging: one test each, on a cluster each, so the
/// four failovers run side by side rather than one after the other.
mod wait_for_replicas_prevents_double_grants_when_a_master_dies {
    use super::double_grants_after_a_master_is_killed;

    /// One scenario: its figures printed (measured, reported in the notes), and what the
    /// option promises asserted.
    async fn scenario(wait_for: Option<u32>, lagging: bool) {
        let (granted, doubles, asked) =
            double_grants_after_a_master_is_killed(wait_for, lagging).await;
        println!(
            "WAIT {:<4} replica {:<7}: {granted}/{asked} granted, {doubles} granted again after the master was killed",
            wait_for.map_or("off".to_owned(), |n| n.to_string()),
            if lagging { "lagging" } else { "in sync" }
        );
        if wait_for.is_some() {
            assert_eq!(
                doubles, 0,
                "a confirmed grant survives the failover (lagging: {lagging})"
            );
            if lagging {
                assert_eq!(
                    granted, 0,
                    "with the replica stalled, no grant is confirmed, so none is given"
                );
            }
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn wait_off_replica_in_sync() {
        scenario(None, false).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn wait_off_replica_lagging() {
        scenario(None, true).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn wait_on_replica_in_sync() {
        scenario(Some(1), false).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn wait_on_replica_lagging() {
        scenario(Some(1), true).await;
    }
}

/// The store grace period on a Cluster: the master of the lock's slot fails over to a replica that lacks the
/// grant. The contender, connected before, grants nothing on that master's slots until the
/// holder's lease is over, and grants a name on another master at once meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failover_to_a_lagging_replica_grants_nothing_on_its_slots_during_the_grace() {
    const LEASE: Duration = Duration::from_secs(15);
    let mut cluster = RedisCluster::start().expect("cluster");
    let lock = || {
        RedisLock::builder()
            .cluster_urls(cluster.urls())
            .connect_timeout(Duration::from_secs(3))
            .command_timeout(Duration::from_secs(1))
            .grace(LEASE)
            .build()
            .expect("cluster URLs")
    };
    let holder = Locker::new(lock());
    let contender = Locker::new(lock());
    let name = "grace:job";
    let victim = node_of(&cluster, name);
    let replica = cluster.replica_of(victim).expect("a replica");
    let elsewhere = (0..1_000)
        .map(|i| format!("grace:other:{i}"))
        .find(|n| node_of(&cluster, n) != victim)
        .expect("a name on another master");

    // The contender's first look: a fresh cluster grants at once.
    let fresh = contender
        .lock("grace:fresh")
        .fixed_ttl(LEASE)
        .try_acquire()
        .await
        .expect("no error")
        .expect("a fresh cluster grants at once");
    fresh.release().await.expect("released");

    // The replica is stopped and its link cut (a stopped process still receives into its
    // socket buffer), so the grant never reaches it.
    cluster.nodes()[replica]
        .server()
        .pause()
        .expect("SIGSTOP the replica");
    cluster.nodes()[victim]
        .command(&["CLIENT", "KILL", "TYPE", "replica"])
        .expect("cut the replication link");
    let held = holder
        .lock(name)
        .fixed_ttl(LEASE)
        .await
        .expect("granted on the old master");
    cluster.kill(victim);
    cluster.nodes()[replica]
        .server()
        .resume()
        .expect("SIGCONT the replica");
    let promoted = cluster
        .wait_for_failover(key_slot(name))
        .expect("the replica took over");
    assert_eq!(promoted, replica);
    assert_eq!(
        cluster.nodes()[replica]
            .command(&["EXISTS", name])
            .expect("EXISTS")
            .trim(),
        "0",
        "the promoted replica lacks the grant"
    );
    assert!(
        Instant::now() < held.valid_until().into_std(),
        "the failover took longer than the lease: nothing left to test"
    );

    // The contender saw the master change: that master's slots grant nothing...
    let refused = contender
        .lock(name)
        .fixed_ttl(LEASE)
        .try_acquire()
        .await
        .expect("no error");
    assert!(
        refused.is_none(),
        "granted on the promoted replica during the holder's lease"
    );
    // ...while another master's grant at once.
    let other = contender
        .lock(elsewhere.as_str())
        .fixed_ttl(LEASE)
        .try_acquire()
        .await
        .expect("no error")
        .expect("another master's slots grant at once");
    assert!(
        Instant::now() < held.valid_until().into_std(),
        "granted elsewhere while the holder's lease still ran"
    );
    other.release().await.expect("released");

    let got = contender
        .lock(name)
        .fixed_ttl(LEASE)
        .wait(LEASE * 3)
        .await
        .expect("granted after the grace");
    let got_from = got.valid_until() - LEASE;
    assert!(
        got_from >= held.valid_until(),
        "two valid leases at once: the grant began {:?} before the holder's lease ended",
        held.valid_until() - got_from
    );
    got.release().await.expect("released");
    drop(held.leak());
}

on_both_servers!(
    names_over_many_slots_lock_on_their_own_masters,
    tasks_exclude_each_other_on_a_cluster,
    releases_wake_waiters_over_sharded_pubsub,
    locks_survive_a_slot_migration_while_held_and_waited_for,
    a_lock_is_released_while_its_slot_migrates,
    a_graceful_failover_keeps_held_locks_and_waiters_live,
);
