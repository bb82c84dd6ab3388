//! The multi-lock on real servers: one atomic script on one server (nothing written when any
//! name is held), one name after the other across the slots of a cluster, and no deadlock or
//! overlap between tasks taking overlapping sets in random orders.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use lock_core::Locker;

use crate::common::{get, locker_on, raw, server, token_of};

#[tokio::test]
async fn one_server_takes_every_name_in_one_step_or_none() {
    let server = server();
    let locker = locker_on(&server);
    let mut conn = raw(&server).await;
    let b = locker.lock("b").await.expect("free");
    let none = locker
        .lock_all(["a", "b", "c"])
        .try_acquire()
        .await
        .expect("answers");
    assert!(none.is_none());
    assert_eq!(get(&mut conn, "a").await, None, "nothing written for a");
    assert_eq!(get(&mut conn, "c").await, None, "nothing written for c");
    b.release().await.expect("ours");

    let all = locker.lock_all(["a", "b", "c"]).await.expect("free");
    let value = token_of(all.guard("a").expect("held"));
    for name in ["a", "b", "c"] {
        assert_eq!(
            get(&mut conn, name).await.as_deref(),
            Some(value.as_str()),
            "{name}"
        );
    }
    let fences: Vec<u64> = all.guards().iter().map(|g| g.fencing_token()).collect();
    assert!(fences.iter().all(|f| *f > 0), "{fences:?}");
    // Each name's token comes from its own counter, above every earlier grant of the name.
    let again = {
        all.release().await.expect("ours");
        locker.lock("b").await.expect("free")
    };
    assert!(again.fencing_token() > fences[1]);
    again.release().await.expect("ours");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlapping_sets_never_deadlock_or_overlap() {
    const TASKS: usize = 16;
    const ROUNDS: usize = 25;
    const NAMES: usize = 8;
    let server = server();
    // Four "processes" (lockers with their own connections), four tasks each.
    let lockers: Vec<Locker> = (0..4).map(|_| locker_on(&server)).collect();
    let inside: Arc<Vec<AtomicBool>> =
        Arc::new((0..NAMES).map(|_| AtomicBool::new(false)).collect());
    let overlaps = Arc::new(AtomicU32::new(0));
    let tasks: Vec<_> = (0..TASKS)
        .map(|task| {
            let locker = lockers[task % 4].clone();
            let (inside, overlaps) = (Arc::clone(&inside), Arc::clone(&overlaps));
            tokio::spawn(async move {
                let mut rng = fastrand::Rng::with_seed(task as u64);
                for _ in 0..ROUNDS {
                    let mut picked: Vec<usize> = (0..NAMES).collect();
                    rng.shuffle(&mut picked);
                    picked.truncate(3);
                    let guard = locker
                        .lock_all(picked.iter().map(|i| format!("n{i}")))
                        .wait(Duration::from_secs(30))
                        .await
                        .expect("granted within the wait: no deadlock");
                    for &i in &picked {
                        if inside[i].swap(true, Ordering::SeqCst) {
                            overlaps.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    for &i in &picked {
                        inside[i].store(false, Ordering::SeqCst);
                    }
                    guard.release().await.expect("ours");
                }
            })
        })
        .collect();
    tokio::time::timeout(Duration::from_secs(120), futures::future::join_all(tasks))
        .await
        .expect("every task finished")
        .into_iter()
        .for_each(|task| task.expect("no panic"));
    assert_eq!(overlaps.load(Ordering::SeqCst), 0);
}

#[cfg(feature = "cluster")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_takes_names_across_slots_and_within_one() {
    use lock_redis::{RedisLock, key_slot};
    use lock_testkit::RedisCluster;
    let cluster = RedisCluster::start().expect("cluster");
    let lock = RedisLock::builder()
        .cluster_urls(cluster.urls())
        .build()
        .expect("urls");
    let locker = Locker::new(lock);
    // Names on different slots (and so, here, different masters): one after the other.
    let spread = ["alpha", "bravo", "charlie", "delta"];
    let slots: std::collections::HashSet<_> = spread.iter().map(|n| key_slot(n)).collect();
    assert!(slots.len() > 1, "the names span slots");
    let held = locker.lock("charlie").await.expect("free");
    assert!(
        locker
            .lock_all(spread)
            .try_acquire()
            .await
            .expect("answers")
            .is_none(),
        "charlie is held"
    );
    for name in ["alpha", "bravo", "delta"] {
        let free = locker.lock(name).try_acquire().await.expect("answers");
        assert!(free.is_some(), "{name} was given back");
    }
    held.release().await.expect("ours");
    let all = locker.lock_all(spread).await.expect("free");
    all.release().await.expect("ours");
    // Names that share a hash tag: one slot, one script.
    let tagged = ["{acct}:1", "{acct}:2", "{acct}:3"];
    let all = locker.lock_all(tagged).await.expect("free");
    assert_eq!(all.guards().len(), 3);
    all.release().await.expect("ours");
}
