//! Revocation ([`Locker::revoke`](lock_core::Locker::revoke),
//! [`LockRequest::revocable`](lock_core::LockRequest::revocable)): a revocable holder is told
//! that another process asks for the lock, with its note, and decides; a holder that carries on
//! keeps the lock; a request is for the grant asked, never for a later holder of the name.
//!
//! Written once in the Locker over the backend's own grants, notes and holder reads; offered
//! by every backend that describes its holders and issues fencing tokens.

use std::time::Duration;

use super::{Backend, name};

/// A revocable holder is told within [`Backend::patience`] (its next renewal), with the note;
/// one that carries on keeps the lock (another locker's try is refused) until it releases.
///
/// # Panics
/// When the request names another grant, the holder is not told, the note is lost, or the
/// lock is taken from a holder that ignored the request.
pub async fn a_revocable_holder_is_told(backend: &Backend, prefix: &str) {
    let name = name(prefix, "told");
    let lease = backend.short_ttl;
    let holder = backend
        .locker()
        .lock(name.as_str())
        .lease(lease)
        .revocable()
        .await
        .unwrap_or_else(|e| panic!("the grant of {name}: {e}"));
    let revoker = backend.locker();
    let asked = revoker
        .revoke(&name, Some("maintenance window"))
        .await
        .unwrap_or_else(|e| panic!("revoke {name}: {e}"));
    assert_eq!(
        asked,
        Some(holder.fencing_token()),
        "the request is for the current grant"
    );
    let told = tokio::time::timeout(backend.patience, holder.revoked()).await;
    assert!(
        told.is_ok() && holder.is_revoked(),
        "the revocable holder of {name} was not told within {:?} (lost: {})",
        backend.patience,
        !holder.is_held()
    );
    assert_eq!(
        holder.revocation_note().as_deref(),
        Some("maintenance window")
    );
    // It carries on: the lock stays its own through more renewals.
    tokio::time::sleep(lease).await;
    assert!(
        holder.is_held(),
        "a holder that ignored the request lost the lock"
    );
    let other = backend
        .locker()
        .lock(name.as_str())
        .try_acquire()
        .await
        .unwrap_or_else(|e| panic!("a try of {name}: {e}"));
    assert!(
        other.is_none(),
        "a revocation took the lock from a holder that kept it"
    );
    holder.release().await.expect("the holder's own");
}

/// Nobody holds the name: `revoke` answers `None`. A request for one grant is not seen by the
/// next holder of the name, nor by a holder that is not revocable.
///
/// # Panics
/// When a request reaches a grant it was not for.
pub async fn revocation_is_for_the_grant_asked(backend: &Backend, prefix: &str) {
    let name = name(prefix, "grant");
    let lease = backend.short_ttl;
    let revoker = backend.locker();
    let nobody = revoker
        .revoke(&name, None)
        .await
        .unwrap_or_else(|e| panic!("revoke {name}: {e}"));
    assert_eq!(nobody, None, "a request for a name nobody holds");
    let first = backend
        .locker()
        .lock(name.as_str())
        .lease(lease)
        .revocable()
        .await
        .unwrap_or_else(|e| panic!("the first grant of {name}: {e}"));
    revoker.revoke(&name, None).await.expect("revoke");
    tokio::time::timeout(backend.patience, first.revoked())
        .await
        .expect("the first holder is told");
    first.release().await.expect("honoured");
    let second = backend
        .locker()
        .lock(name.as_str())
        .lease(lease)
        .revocable()
        .await
        .unwrap_or_else(|e| panic!("the second grant of {name}: {e}"));
    // Three renewals: each looked for a request for its own grant.
    tokio::time::sleep(lease + Duration::from_millis(50)).await;
    assert!(
        !second.is_revoked() && second.is_held(),
        "the request for the first grant reached the second"
    );
    second.release().await.expect("the second holder's own");
}

/// Where the backend announces releases ([`Backend::announces_releases`]), a revocable holder is
/// told long before its next renewal: its lease is three patiences long (a renewal every
/// patience), and it must be told within half of one. Elsewhere the renewal tells it, as
/// [`a_revocable_holder_is_told`] checks.
///
/// # Panics
/// When an announcing backend's holder is told only at its renewal, or not at all.
pub async fn announcing_backends_tell_at_once(backend: &Backend, prefix: &str) {
    if !backend.announces_releases() {
        return;
    }
    let name = name(prefix, "at-once");
    let holder = backend
        .locker()
        .lock(name.as_str())
        .lease(backend.patience * 3)
        .revocable()
        .await
        .unwrap_or_else(|e| panic!("the grant of {name}: {e}"));
    // Let the holder's listener subscribe.
    tokio::time::sleep(backend.settle).await;
    backend
        .locker()
        .revoke(&name, None)
        .await
        .unwrap_or_else(|e| panic!("revoke {name}: {e}"));
    let told = tokio::time::timeout(backend.patience / 2, holder.revoked()).await;
    assert!(
        told.is_ok() && holder.is_revoked(),
        "the holder of {name} on a backend that announces releases was not told within {:?} \
         (its next renewal is {:?} away)",
        backend.patience / 2,
        backend.patience
    );
    holder.release().await.expect("the holder's own");
}
