//! The double barrier ([`Locker::barrier`](lock_core::Locker::barrier)): its members pass it
//! together once all are in, leave it together, and a member that crashes is counted out
//! when its lease ends.
//!
//! Written once in lock-core over the backend's semaphores: these checks are what makes that
//! true of each store.

use lock_core::{Barrier, Locker};
use tokio::time::Instant;

use super::{Backend, name};

/// The barrier `name` of `parties` on `locker`, with the backend's short lease and its
/// patience.
fn barrier(backend: &Backend, locker: &Locker, name: &str, parties: u32) -> Barrier {
    locker
        .barrier(name, parties)
        .lease(backend.short_ttl)
        .wait_at_most(backend.patience)
}

/// Three members on lockers of their own: the first two wait in `enter` until the third is
/// in, and then all pass; the two that leave first wait in `leave` until the third has left.
///
/// # Panics
/// When a member passes or leaves before the others, or does not within the patience.
pub async fn members_enter_and_leave_together(backend: &Backend, prefix: &str) {
    let name = name(prefix, "three");
    let early: Vec<_> = (0..2)
        .map(|_| {
            let barrier = barrier(backend, &backend.locker(), &name, 3);
            tokio::spawn(async move { barrier.enter().await })
        })
        .collect();
    tokio::time::sleep(backend.settle).await;
    assert!(
        early.iter().all(|e| !e.is_finished()),
        "a member passed {name} before the third was in"
    );
    let third = barrier(backend, &backend.locker(), &name, 3)
        .enter()
        .await
        .unwrap_or_else(|e| panic!("the third member of {name}: {e}"));
    let mut leaving = Vec::new();
    for member in early {
        let member = tokio::time::timeout(backend.patience, member)
            .await
            .unwrap_or_else(|_| panic!("{name} did not open for the first two"))
            .expect("the member ran")
            .unwrap_or_else(|e| panic!("a member of {name}: {e}"));
        leaving.push(tokio::spawn(member.leave()));
    }
    tokio::time::sleep(backend.settle).await;
    assert!(
        leaving.iter().all(|l| !l.is_finished()),
        "a member left {name} before the third"
    );
    third
        .leave()
        .await
        .unwrap_or_else(|e| panic!("the third member's leave of {name}: {e}"));
    for leave in leaving {
        let left = tokio::time::timeout(backend.patience, leave).await;
        assert!(
            left.is_ok_and(|l| l.is_ok_and(|l| l.is_ok())),
            "a member's leave of {name} did not end after the last had left"
        );
    }
}

/// Two members pass; one crashes (its guards leaked); the other's `leave` ends once the
/// crashed member's lease is over (it is counted out), within the patience.
///
/// # Panics
/// When the leave waits on, or ends while the crashed member's lease still runs.
pub async fn a_crashed_member_is_counted_out(backend: &Backend, prefix: &str) {
    let name = name(prefix, "crashed");
    let other = {
        let barrier = barrier(backend, &backend.locker(), &name, 2);
        tokio::spawn(async move { barrier.enter().await })
    };
    let member = barrier(backend, &backend.locker(), &name, 2)
        .enter()
        .await
        .unwrap_or_else(|e| panic!("a member of {name}: {e}"));
    let crashed = tokio::time::timeout(backend.patience, other)
        .await
        .unwrap_or_else(|_| panic!("{name} did not open"))
        .expect("the member ran")
        .unwrap_or_else(|e| panic!("the other member of {name}: {e}"));
    let crashed_at = Instant::now();
    let _kept = crashed.leak();
    member
        .leave()
        .await
        .unwrap_or_else(|e| panic!("the leave of {name} after a crash: {e}"));
    assert!(
        crashed_at.elapsed() >= backend.short_ttl / 2,
        "{name}'s leave ended {:?} after the crash, while its {:?} lease ran",
        crashed_at.elapsed(),
        backend.short_ttl
    );
}
