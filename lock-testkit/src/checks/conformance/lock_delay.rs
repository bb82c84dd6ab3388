//! Lock-delay ([`LockRequest::lock_delay`](lock_core::LockRequest::lock_delay)): a lease that
//! ends by expiry keeps its name from every new grant for the delay after its end; a release
//! frees it at once; the holder's validity is the lease's alone, renewed or not.
//!
//! The Locker writes it once over any backend that keeps a lease for the whole TTL it asked for
//! (`Capabilities::lock_delay`); these checks are what makes that true of each store: a store
//! that ended a lease early, or a Locker that left the delay out of one TTL it sent, fails
//! them.

use std::time::Duration;

use tokio::time::Instant;

use super::{Backend, name};

/// The delay the checks ask for: as long as the backend's short TTL, so the window in which
/// the name must stay busy (lease over, delay not) is as wide as the lease itself.
fn delay(backend: &Backend) -> Duration {
    backend.short_ttl
}

/// A holder that stops renewing (its process crashed: here its guard is leaked, so nothing is
/// released) keeps the name from another locker until its lease *and* the delay are over,
/// measured from before its grant: the successor's grant comes no earlier than lease + delay.
/// The holder's own validity ends with its lease, not with the delay.
///
/// # Panics
/// When the holder's validity includes the delay, when another locker is granted the name
/// before lease + delay from the holder's request, or when no one gets it within
/// [`Backend::patience`] after that.
pub async fn expired_holder_keeps_the_name_for_the_delay(backend: &Backend, prefix: &str) {
    let name = name(prefix, "expired");
    let (lease, delay) = (backend.short_ttl, delay(backend));
    let started = Instant::now();
    let holder = backend
        .locker()
        .lock(name.as_str())
        .fixed_ttl(lease)
        .lock_delay(delay)
        .await
        .unwrap_or_else(|e| panic!("the first grant of {name}: {e}"));
    // The attempt began before this answer, so the lease's own validity ends before
    // `answered + lease`.
    let answered = Instant::now();
    let valid_until = holder.lease().valid_until();
    assert!(
        valid_until <= answered + lease,
        "the holder's validity ({:?} after the grant's answer) includes the lock-delay: it \
         must end with the {lease:?} lease",
        valid_until - answered
    );
    // The holder's process dies: no release, no renewal.
    let _kept = holder.leak();
    let other = backend.locker();
    // Inside the delay: the lease is over, the name is not free yet.
    tokio::time::sleep_until(started + lease + delay / 2).await;
    let tried = other
        .lock(name.as_str())
        .fixed_ttl(lease)
        .try_acquire()
        .await
        .unwrap_or_else(|e| panic!("a try of {name} inside the delay: {e}"));
    let granted = match tried {
        Some(guard) => (guard, Instant::now()),
        None => {
            let guard = other
                .lock(name.as_str())
                .fixed_ttl(lease)
                .wait(backend.patience + lease + delay)
                .await
                .unwrap_or_else(|e| panic!("{name} after the lease and the delay: {e}"));
            (guard, Instant::now())
        }
    };
    let (successor, at) = granted;
    assert!(
        at - started >= lease + delay,
        "another locker was granted {name} {:?} after the holder's request: the {lease:?} lease \
         plus the {delay:?} lock-delay had not passed",
        at - started
    );
    successor.release().await.expect("the successor's own");
}

/// A release frees the name at once, however long the delay: the delay is for a holder that
/// failed, not for one that gave the lock up.
///
/// # Panics
/// When another locker's single try after the release finds the name busy.
pub async fn release_frees_the_name_at_once(backend: &Backend, prefix: &str) {
    let name = name(prefix, "released");
    let holder = backend
        .locker()
        .lock(name.as_str())
        .lock_delay(backend.patience * 6)
        .await
        .unwrap_or_else(|e| panic!("the first grant of {name}: {e}"));
    holder.release().await.expect("the holder's own");
    let next = backend
        .locker()
        .lock(name.as_str())
        .try_acquire()
        .await
        .unwrap_or_else(|e| panic!("a try of {name} after the release: {e}"));
    let next = next.unwrap_or_else(|| {
        panic!("{name} was busy right after its holder released it (a lock-delay held it)")
    });
    next.release().await.expect("the next holder's own");
}

/// A renewed lease with a lock-delay is held across several of its lengths, and its validity
/// after each renewal is that of the lease, never the lease plus the delay (the renewals ask
/// the store for both; the holder is told only of its own).
///
/// # Panics
/// When the guard is lost while renewed, or its validity runs further than one lease ahead.
pub async fn renewed_validity_is_the_leases(backend: &Backend, prefix: &str) {
    let name = name(prefix, "renewed");
    let lease = backend.short_ttl;
    let guard = backend
        .locker()
        .lock(name.as_str())
        .lease(lease)
        .lock_delay(backend.patience)
        .await
        .unwrap_or_else(|e| panic!("the grant of {name}: {e}"));
    for _ in 0..6 {
        tokio::time::sleep(lease / 2).await;
        assert!(
            guard.is_held(),
            "the renewed guard of {name} was lost while its lease was renewed"
        );
        let ahead = guard.lease().remaining();
        assert!(
            ahead <= lease,
            "after a renewal the holder's validity runs {ahead:?} ahead, more than its \
             {lease:?} lease: the lock-delay leaked into it"
        );
    }
    guard.release().await.expect("the holder's own");
}
