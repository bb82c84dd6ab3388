//! The multi-lock ([`Locker::lock_all`](lock_core::Locker::lock_all)): all or nothing, no
//! deadlock or overlap between overlapping sets, losing one lease is losing the guard, and a
//! cancelled request leaves nothing behind.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use super::{Backend, name, poll_then_drop};

/// The check's names `count` names: `prefix:check:0`, `prefix:check:1`, ...
fn names(prefix: &str, check: &str, count: usize) -> Vec<String> {
    (0..count)
        .map(|i| format!("{}:{i}", name(prefix, check)))
        .collect()
}

/// With one of three names held elsewhere, the multi-lock takes none of them; once it is free,
/// all three.
pub async fn all_or_nothing(backend: &Backend, prefix: &str) {
    let names = names(prefix, "all-or-nothing", 3);
    let other = backend.locker();
    let middle = other.lock(names[1].as_str()).await.expect("free");
    let locker = backend.locker();
    let none = locker
        .lock_all(names.iter().map(String::as_str))
        .try_acquire()
        .await
        .expect("answers");
    assert!(none.is_none(), "a multi-lock got a held name");
    for free in [&names[0], &names[2]] {
        let guard = other
            .lock(free.as_str())
            .try_acquire()
            .await
            .expect("answers");
        assert!(guard.is_some(), "{free} was kept by a refused multi-lock");
    }
    middle.release().await.expect("ours");
    let all = backend
        .within(
            "the multi-lock",
            locker
                .lock_all(names.iter().map(String::as_str))
                .wait(backend.patience)
                .into_future(),
        )
        .await
        .expect("all free");
    assert_eq!(all.guards().len(), 3);
    let fenced = backend.fencing() != super::Fencing::None;
    assert!(
        all.guards()
            .iter()
            .all(|guard| (guard.fencing_token() > 0) == fenced),
        "each name carries its fencing token (none without fencing)"
    );
    all.release().await.expect("ours");
}

/// Eight tasks on four lockers take random sets of 3 of 6 names in random orders, a few rounds
/// each: every round is granted within the patience (no deadlock) and no name is held twice.
pub async fn no_deadlock_or_overlap(backend: &Backend, prefix: &str) {
    const NAMES: usize = 6;
    const ROUNDS: u32 = 6;
    let names = Arc::new(names(prefix, "overlapping", NAMES));
    let inside: Arc<Vec<AtomicBool>> =
        Arc::new((0..NAMES).map(|_| AtomicBool::new(false)).collect());
    let overlaps = Arc::new(AtomicU32::new(0));
    let lockers: Vec<_> = (0..4).map(|_| backend.locker()).collect();
    let tasks: Vec<_> = (0..8u64)
        .map(|task| {
            let locker = lockers[(task % 4) as usize].clone();
            let (names, inside, overlaps) = (
                Arc::clone(&names),
                Arc::clone(&inside),
                Arc::clone(&overlaps),
            );
            let (patience, hold) = (backend.patience, backend.settle / 20);
            tokio::spawn(async move {
                let mut rng = fastrand::Rng::with_seed(task);
                for _ in 0..ROUNDS {
                    let mut picked: Vec<usize> = (0..NAMES).collect();
                    rng.shuffle(&mut picked);
                    picked.truncate(3);
                    let guard = locker
                        .lock_all(picked.iter().map(|&i| names[i].as_str()))
                        .wait(patience)
                        .await
                        .expect("granted within the patience: no deadlock");
                    for &i in &picked {
                        if inside[i].swap(true, Ordering::SeqCst) {
                            overlaps.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                    tokio::time::sleep(hold).await;
                    for &i in &picked {
                        inside[i].store(false, Ordering::SeqCst);
                    }
                    guard.release().await.expect("ours");
                }
            })
        })
        .collect();
    // Each round is bounded by the patience (its `wait`, which is the no-deadlock check);
    // a task's rounds together by that many patiences: on a loaded machine a task that waits
    // behind the others in every round can take longer than one, and that is no deadlock.
    let all_rounds = backend.patience * ROUNDS;
    for task in tasks {
        match tokio::time::timeout(all_rounds, task).await {
            Ok(done) => done.expect("no panic"),
            Err(_) => panic!("a task's rounds: not done within {all_rounds:?}"),
        }
    }
    assert_eq!(
        overlaps.load(Ordering::SeqCst),
        0,
        "a name was held twice at once"
    );
}

/// A multi-lock with a short fixed TTL is lost (naming one of its locks) when its leases run
/// out while the guard lives.
pub async fn losing_one_is_losing_the_guard(backend: &Backend, prefix: &str) {
    let names = names(prefix, "lost", 2);
    let guard = backend
        .locker()
        .lock_all(names.iter().map(String::as_str))
        .fixed_ttl(backend.short_ttl)
        .await
        .expect("free");
    let lost = backend.within("the lost signal", guard.lost()).await;
    assert!(
        names.contains(&lost),
        "lost names {lost:?}, not one of {names:?}"
    );
    assert!(!guard.is_held());
}

/// A multi-lock request dropped while it waits for a held name leaves none of its names
/// behind: once the holder releases, another request takes them all at once.
pub async fn cancelled_acquire_leaves_nothing(backend: &Backend, prefix: &str) {
    let names = names(prefix, "cancelled", 3);
    let holder = backend.locker();
    let held = holder.lock(names[2].as_str()).await.expect("free");
    let waiting = backend
        .locker()
        .lock_all(names.iter().map(String::as_str))
        .wait(backend.patience)
        .into_future();
    let done = poll_then_drop(waiting, 4, backend.settle / 4).await;
    assert!(!done, "the multi-lock got a held name");
    held.release().await.expect("ours");
    tokio::time::sleep(backend.settle).await; // background releases, if any, land
    let all = backend
        .locker()
        .lock_all(names.iter().map(String::as_str))
        .try_acquire()
        .await
        .expect("answers");
    assert!(all.is_some(), "a cancelled multi-lock left a name behind");
}
