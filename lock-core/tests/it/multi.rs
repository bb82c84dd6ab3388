//! The multi-lock over MemoryLock: all or nothing, no deadlock between overlapping sets, one
//! lease per name renewed together, and losing any one is losing the guard.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use crate::common::probe_locker;
use lock_core::{LockError, Locker, MAX_MULTI, MemoryLock};

#[tokio::test(start_paused = true)]
async fn all_or_nothing() {
    let store = Arc::new(MemoryLock::new());
    let locker = Locker::new(Arc::clone(&store));
    let b = locker.lock("b").await.expect("free");
    let first_b = b.fencing_token();
    let none = locker
        .lock_all(["a", "b", "c"])
        .try_acquire()
        .await
        .expect("answers");
    assert!(none.is_none(), "b is held");
    assert_eq!(store.held_count(), 1, "a and c were not kept");
    b.release().await.expect("ours");
    let all = locker.lock_all(["c", "a", "b", "a"]).await.expect("free");
    assert_eq!(all.names().collect::<Vec<_>>(), ["a", "b", "c"]);
    let tokens: Vec<_> = ["a", "b", "c"]
        .iter()
        .map(|name| all.fencing_token(name).expect("held"))
        .collect();
    assert!(tokens.iter().all(|t| *t > 0), "each name has its own token");
    assert!(tokens[1] > first_b, "b's token grew past its first grant's");
    assert_eq!(all.fencing_token("d"), None, "not a name of the guard");
    let guards: Vec<_> = all.guards().iter().map(|g| g.fencing_token()).collect();
    assert_eq!(guards, tokens, "one guard per name, sorted by name");
    assert_eq!(store.held_count(), 3);
    all.release().await.expect("ours");
    assert_eq!(store.held_count(), 0);
}

#[tokio::test(start_paused = true)]
async fn bad_name_lists_are_invalid_input() {
    let locker = Locker::new(MemoryLock::new());
    let empty = locker.lock_all(Vec::<String>::new()).await;
    assert!(
        matches!(empty, Err(LockError::InvalidInput { .. })),
        "{empty:?}"
    );
    let many = locker
        .lock_all((0..=MAX_MULTI).map(|i| format!("n{i}")))
        .await;
    assert!(
        matches!(many, Err(LockError::InvalidInput { .. })),
        "{many:?}"
    );
    let most = locker
        .lock_all((0..MAX_MULTI).map(|i| format!("n{i}")))
        .await
        .expect("as many names as a multi-lock takes");
    most.release().await.expect("ours");
    let blank = locker.lock_all(["a", ""]).await;
    assert!(
        matches!(blank, Err(LockError::InvalidInput { .. })),
        "{blank:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlapping_sets_in_random_orders_never_deadlock_or_overlap() {
    const TASKS: usize = 16;
    const ROUNDS: usize = 60;
    const NAMES: usize = 8;
    let locker = Locker::new(MemoryLock::new());
    let inside: Arc<Vec<AtomicBool>> =
        Arc::new((0..NAMES).map(|_| AtomicBool::new(false)).collect());
    let overlaps = Arc::new(AtomicU32::new(0));
    let tasks: Vec<_> = (0..TASKS)
        .map(|task| {
            let (locker, inside, overlaps) =
                (locker.clone(), Arc::clone(&inside), Arc::clone(&overlaps));
            tokio::spawn(async move {
                let mut rng = fastrand::Rng::with_seed(task as u64);
                for _ in 0..ROUNDS {
                    // 3 distinct names of 8, in a random order.
                    let mut picked: Vec<usize> = (0..NAMES).collect();
                    rng.shuffle(&mut picked);
                    picked.truncate(3);
                    let guard = locker
                        .lock_all(picked.iter().map(|i| format!("n{i}")))
                        .wait(Duration::from_secs(30))
                        .await
                        .expect("no deadlock: granted within the wait");
                    for &i in &picked {
                        if inside[i].swap(true, Ordering::SeqCst) {
                            overlaps.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                    tokio::task::yield_now().await;
                    for &i in &picked {
                        inside[i].store(false, Ordering::SeqCst);
                    }
                    guard.release().await.expect("ours");
                }
            })
        })
        .collect();
    let all = futures::future::join_all(tasks);
    tokio::time::timeout(Duration::from_secs(60), all)
        .await
        .expect("every task finished: no deadlock")
        .into_iter()
        .for_each(|task| task.expect("no panic"));
    assert_eq!(
        overlaps.load(Ordering::SeqCst),
        0,
        "no name held twice at once"
    );
}

#[tokio::test(start_paused = true)]
async fn losing_one_lease_is_losing_the_guard() {
    let (probe, locker) = probe_locker(Duration::from_millis(300));
    let answer = locker
        .lock_all(["x", "y"])
        .run(|watches| async move {
            assert_eq!(watches.len(), 2);
            tokio::time::sleep(Duration::from_secs(1)).await; // renewed meanwhile
            probe.stolen.store(true, Ordering::SeqCst); // the next renewals find them gone
            tokio::time::sleep(Duration::from_secs(10)).await;
            "finished"
        })
        .await;
    assert!(
        matches!(&answer, Err(LockError::Lost { name }) if name == "x" || name == "y"),
        "{answer:?}"
    );
}

/// A multi-lock waiting on the same busy name keeps one subscription to its releases (a new
/// one only when another name is the busy one), and the release wakes it.
#[tokio::test(start_paused = true)]
async fn a_waiting_multi_lock_subscribes_once_to_the_busy_name() {
    let (probe, locker) = probe_locker(Duration::from_secs(60));
    probe.announces.store(true, Ordering::SeqCst);
    // The first name in order is the busy one: no attempt takes (and gives back) another,
    // whose release the probe would announce to every watcher.
    let held = locker.lock("x").await.expect("free");
    let waiter = crate::common::slow_polling_locker(&probe);
    let all = tokio::spawn(async move {
        waiter
            .lock_all(["x", "y"])
            .wait(Duration::from_secs(60))
            .await
            .map(|all| (all, tokio::time::Instant::now()))
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(probe.count(&probe.watch_calls), 1, "one subscription to x");
    let released_at = tokio::time::Instant::now();
    held.release().await.expect("ours");
    let (all, granted_at) = all.await.expect("task").expect("granted");
    assert!(granted_at - released_at < Duration::from_millis(100));
    all.release().await.expect("ours");
}

/// A held multi-lock whose leases are taken by another holder says so: not held.
#[tokio::test(start_paused = true)]
async fn a_multi_guard_whose_leases_were_taken_is_not_held() {
    let (probe, locker) = probe_locker(Duration::from_millis(300));
    let all = locker.lock_all(["x", "y"]).await.expect("free");
    assert!(all.is_held());
    probe.stolen.store(true, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!all.is_held(), "the renewals found the leases gone");
}

#[tokio::test(start_paused = true)]
async fn names_the_task_holds_are_nested() {
    tokio::spawn(async {
        let locker = Locker::new(MemoryLock::new());
        let a = locker.lock("a").await.expect("free");
        let both = locker
            .lock_all(["a", "b"])
            .wait(Duration::from_secs(1))
            .await
            .expect("a nests, b is taken");
        assert!(both.guard("a").expect("held").is_nested());
        assert!(!both.guard("b").expect("held").is_nested());
        both.release().await.expect("ours");
        assert!(a.is_held(), "the outer guard still holds a");
        a.release().await.expect("ours");
    })
    .await
    .expect("no panic");
}
