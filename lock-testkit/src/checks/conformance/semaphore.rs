//! The counting semaphore ([`Locker::semaphore`](lock_core::Locker::semaphore)): never more
//! than `max` permits, `k` at once, waiters for `k`, one count per name, `available()`,
//! cancellation.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use lock_core::{Guard, Kind, LockError};

use super::{Backend, name, poll_then_drop};

/// Takes `permits` of the `max` of `name` on a fresh locker, waiting at most the patience.
async fn take(backend: &Backend, name: &str, max: u32, permits: u32) -> Guard {
    backend
        .locker()
        .semaphore(name, max)
        .permits(permits)
        .wait(backend.patience)
        .await
        .unwrap_or_else(|e| panic!("{permits} of {max} permits of {name}: {e}"))
}

/// Whether a single try for `permits` of `max` gets in (the permits are released).
async fn try_take(backend: &Backend, name: &str, max: u32, permits: u32) -> bool {
    let outcome = backend
        .locker()
        .semaphore(name, max)
        .permits(permits)
        .try_acquire()
        .await
        .unwrap_or_else(|e| panic!("try {permits} of {max} permits of {name}: {e}"));
    match outcome {
        Some(guard) => {
            release(guard).await;
            true
        }
        None => false,
    }
}

async fn available(backend: &Backend, name: &str, max: u32) -> u32 {
    backend
        .locker()
        .semaphore(name, max)
        .available()
        .await
        .unwrap_or_else(|e| panic!("available of {name}: {e}"))
}

async fn release(guard: Guard) {
    let name = guard.name().to_owned();
    guard
        .release()
        .await
        .unwrap_or_else(|e| panic!("release of permits of {name}: {e}"));
}

/// Six holders on lockers of their own, each taking one permit of 3 a few times in a loop:
/// never more than 3 inside at once (counted by the holders), and more than one at some point
/// (the check can fail both ways).
pub async fn never_more_than_max(backend: &Backend, prefix: &str) {
    const MAX: u32 = 3;
    const HOLDERS: usize = 6;
    const ROUNDS: usize = 4;
    let name = name(prefix, "never-more-than-max");
    let inside = Arc::new(AtomicU32::new(0));
    let peak = Arc::new(AtomicU32::new(0));
    let hold = backend.settle / 4;
    let holders: Vec<_> = (0..HOLDERS)
        .map(|_| {
            let (locker, name, patience) = (backend.locker(), name.clone(), backend.patience);
            let (inside, peak) = (Arc::clone(&inside), Arc::clone(&peak));
            tokio::spawn(async move {
                for _ in 0..ROUNDS {
                    let guard = locker
                        .semaphore(name.as_str(), MAX)
                        .wait(patience)
                        .await
                        .expect("a permit within the patience");
                    let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                    peak.fetch_max(now, Ordering::SeqCst);
                    tokio::time::sleep(hold).await;
                    inside.fetch_sub(1, Ordering::SeqCst);
                    guard.release().await.expect("the permit's release");
                }
            })
        })
        .collect();
    for holder in holders {
        backend
            .within("a permit holder's rounds", holder)
            .await
            .expect("the holder task");
    }
    let peak = peak.load(Ordering::SeqCst);
    assert!(peak <= MAX, "{peak} holders of a {MAX}-permit semaphore");
    assert!(
        peak > 1,
        "the semaphore never let two holders in at once (peak {peak})"
    );
    assert_eq!(available(backend, &name, MAX).await, MAX);
}

/// `k` permits are taken at once, all or none: 3 of 5 leave 2, a second request for 3 is
/// refused, one for 2 is granted; the guard says what it holds.
pub async fn k_permits_at_once(backend: &Backend, prefix: &str) {
    let name = name(prefix, "k-at-once");
    let three = take(backend, &name, 5, 3).await;
    assert_eq!(
        three.kind(),
        Kind::Semaphore { permits: 3, max: 5 },
        "the guard holds 3 of 5"
    );
    assert_eq!(available(backend, &name, 5).await, 2);
    assert!(
        !try_take(backend, &name, 5, 3).await,
        "3 more permits granted with 2 free"
    );
    assert_eq!(
        available(backend, &name, 5).await,
        2,
        "a refused request took permits"
    );
    let two = take(backend, &name, 5, 2).await;
    assert_eq!(available(backend, &name, 5).await, 0);
    assert!(
        !try_take(backend, &name, 5, 1).await,
        "a permit granted with none free"
    );
    release(three).await;
    assert_eq!(available(backend, &name, 5).await, 3);
    release(two).await;
    assert_eq!(available(backend, &name, 5).await, 5);
    assert!(
        try_take(backend, &name, 5, 5).await,
        "all permits at once when all are free"
    );
}

/// A waiter for `k` permits stays out while fewer are free and gets in soon after `k` are.
pub async fn waiter_for_k_wakes_when_k_free(backend: &Backend, prefix: &str) {
    const MAX: u32 = 4;
    let name = name(prefix, "waiter-for-k");
    let a = take(backend, &name, MAX, 2).await;
    let b = take(backend, &name, MAX, 2).await;
    let waiter = {
        let (locker, name, patience) = (backend.locker(), name.clone(), backend.patience);
        tokio::spawn(async move {
            locker
                .semaphore(name.as_str(), MAX)
                .permits(3)
                .wait(patience)
                .await
                .expect("the waiter for 3 gets in once 3 are free")
        })
    };
    tokio::time::sleep(backend.settle).await;
    assert!(!waiter.is_finished(), "3 permits granted with none free");
    release(a).await;
    tokio::time::sleep(backend.settle).await;
    assert!(!waiter.is_finished(), "3 permits granted with 2 free");
    release(b).await;
    let three = backend
        .within("the waiter for 3 once 4 are free", waiter)
        .await
        .expect("the waiter task");
    assert_eq!(
        three.kind(),
        Kind::Semaphore {
            permits: 3,
            max: MAX
        }
    );
    assert_eq!(available(backend, &name, MAX).await, 1);
    release(three).await;
}

/// A request with another permit count than the holders' fails with
/// [`LockError::PermitsMismatch`] (try and wait alike, at once); once nobody holds the name,
/// the next holder sets a new count.
pub async fn permits_mismatch_is_an_error(backend: &Backend, prefix: &str) {
    let name = name(prefix, "mismatch");
    let holder = take(backend, &name, 3, 1).await;
    let tried = backend
        .locker()
        .semaphore(name.as_str(), 4)
        .try_acquire()
        .await
        .map(|g| g.is_some());
    assert!(
        matches!(
            tried,
            Err(LockError::PermitsMismatch {
                max: 4,
                held_max: 3,
                ..
            })
        ),
        "a try with 4 permits beside holders of 3: {tried:?}"
    );
    let waited = backend
        .within(
            "a mismatched wait must fail at once",
            backend
                .locker()
                .semaphore(name.as_str(), 2)
                .wait(backend.patience)
                .acquire(),
        )
        .await
        .map(drop);
    assert!(
        matches!(
            waited,
            Err(LockError::PermitsMismatch {
                max: 2,
                held_max: 3,
                ..
            })
        ),
        "a wait with 2 permits beside holders of 3: {waited:?}"
    );
    assert_eq!(
        available(backend, &name, 3).await,
        2,
        "a mismatched request took permits"
    );
    release(holder).await;
    let four = take(backend, &name, 4, 4).await;
    assert_eq!(four.kind(), Kind::Semaphore { permits: 4, max: 4 });
    release(four).await;
}

/// `available()` counts free permits: all of them at first, fewer while held, all again after
/// a release and after a holder's lease expired.
pub async fn available_counts(backend: &Backend, prefix: &str) {
    const MAX: u32 = 5;
    let name = name(prefix, "available");
    assert_eq!(
        available(backend, &name, MAX).await,
        MAX,
        "a semaphore nobody holds"
    );
    let two = take(backend, &name, MAX, 2).await;
    assert_eq!(available(backend, &name, MAX).await, MAX - 2);
    let expiring = backend
        .locker()
        .semaphore(name.as_str(), MAX)
        .permits(1)
        .fixed_ttl(backend.short_ttl)
        .wait(backend.patience)
        .await
        .expect("one more permit");
    assert_eq!(available(backend, &name, MAX).await, MAX - 3);
    release(two).await;
    assert_eq!(available(backend, &name, MAX).await, MAX - 1);
    backend
        .within("the fixed-TTL permit's expiry", expiring.lost())
        .await;
    // The guard counts its lease from before the request was sent, so the store's expiry may
    // come a moment after `lost`: look again for a little while.
    let mut free = available(backend, &name, MAX).await;
    for _ in 0..20 {
        if free == MAX {
            break;
        }
        tokio::time::sleep(backend.settle / 20).await;
        free = available(backend, &name, MAX).await;
    }
    assert_eq!(free, MAX, "an expired holder's permit counts as free");
    assert!(
        try_take(backend, &name, MAX, MAX).await,
        "all permits after the expiry"
    );
    drop(expiring);
}

/// Semaphore acquires dropped while they wait (after any number of polls) leave no permit
/// behind: [`Backend::settle`] after the drops (the cleanup runs in the background), right
/// after the holder's release, all permits are taken at once (the dropped requests asked for
/// 30 s leases, which leftovers would hold).
pub async fn cancelled_acquires_leave_nothing(backend: &Backend, prefix: &str) {
    const MAX: u32 = 3;
    let name = name(prefix, "cancelled-permits");
    let pause = backend.settle / 20;
    let lease = Duration::from_secs(30);
    let waiters = backend.locker();
    let holder = take(backend, &name, MAX, 2).await;
    for polls in 0..12 {
        // One permit is free: these complete (dropped guards release in the background)...
        let one = waiters
            .semaphore(name.as_str(), MAX)
            .lease(lease)
            .wait(backend.patience);
        poll_then_drop(one.acquire(), polls, pause).await;
        // ... these wait.
        let two = waiters
            .semaphore(name.as_str(), MAX)
            .permits(2)
            .lease(lease)
            .wait(backend.patience);
        poll_then_drop(two.acquire(), polls, pause).await;
    }
    // Cleanup of dropped requests runs in the background: give it a moment.
    tokio::time::sleep(backend.settle).await;
    release(holder).await;
    let all = backend
        .locker()
        .semaphore(name.as_str(), MAX)
        .permits(MAX)
        .try_acquire()
        .await
        .expect("try all permits")
        .unwrap_or_else(|| {
            panic!("dropped semaphore acquires left permits behind: all {MAX} are not free")
        });
    release(all).await;
    assert_eq!(available(backend, &name, MAX).await, MAX);
}
