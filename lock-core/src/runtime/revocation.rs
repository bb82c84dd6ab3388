//! The holder's side of revocation ([`Locker::revoke`](crate::Locker::revoke) is the
//! revoker's, in `locker/revoke.rs`): the names a request and its bell take, the look for a
//! request after each renewal, the listener for the bell, and the count of requests honoured.
//! Per-process machinery, beside the watchdog that calls it.

use std::sync::Arc;

use crate::backend::Lock;
use crate::metric::{self, Labels};
use crate::runtime::held::HeldLease;

/// The name of the record that asks the holder of `name`'s grant `fencing_token` to give it
/// up: `NAME:distlock-revoke:TOKEN`.
#[must_use]
pub(crate) fn revocation_name(name: &str, fencing_token: u64) -> String {
    format!("{name}:distlock-revoke:{fencing_token}")
}

/// The name whose release rings the holder of `name`'s grant `fencing_token` when a request
/// for it was written, on a backend that announces releases: `NAME:distlock-revoke-bell:TOKEN`.
pub(crate) fn bell_name(name: &str, fencing_token: u64) -> String {
    format!("{name}:distlock-revoke-bell:{fencing_token}")
}

/// After a renewal of a revocable lease: reads whether its holder was asked to give it up, in
/// the background (the watchdog does not wait for it), and tells the lease so.
pub(crate) fn look_for_revocation(lock: &Arc<dyn Lock>, held: &Arc<HeldLease>) {
    if !held.should_look_for_revocation() {
        return;
    }
    let (lock, held) = (Arc::clone(lock), Arc::clone(held));
    tokio::spawn(async move {
        let record = revocation_name(held.name(), held.fencing_token());
        match lock.describe_holder(&record).await {
            Ok(Some(request)) => {
                let note = request
                    .note
                    .map(|note| Arc::from(String::from_utf8_lossy(&note).as_ref()));
                if held.mark_revoked(note) {
                    held.labels()
                        .count_with(metric::REVOCATIONS_TOTAL, "event", "seen");
                    tracing::info!(
                        name = held.name(),
                        "the holder was asked to give the lock up"
                    );
                }
            }
            Ok(None) => {}
            Err(error) => tracing::debug!(%error, "reading a revocation request failed"),
        }
        held.looked_for_revocation();
    });
}

/// At the grant of a revocable lease on a backend that announces releases: listens for its
/// grant's bell ([`bell_name`]) until the hold ends, is lost or is revoked, and looks for a
/// request as soon as the bell rings. Without announcements the renewals look.
pub(crate) fn listen_for_revocation(lock: &Arc<dyn Lock>, held: &Arc<HeldLease>) {
    // A fixed TTL is never renewed, so never told (see `LockRequest::revocable`).
    if !held.is_revocable() || !held.is_renewing() || !lock.capabilities().announces_releases {
        return;
    }
    let (lock, held) = (Arc::clone(lock), Arc::clone(held));
    tokio::spawn(async move {
        let bell = bell_name(held.name(), held.fencing_token());
        let Ok(Some(watch)) = lock.as_ref().watch(&bell).await else {
            return;
        };
        let signal = watch.signal();
        let over = Arc::clone(&held).over_or_revoked();
        tokio::pin!(over);
        // Bounded by the hold: each turn is one ring of the bell.
        loop {
            let seen = signal.generation();
            tokio::select! {
                () = signal.changed_since(seen) => look_for_revocation(&lock, &held),
                () = &mut over => return,
            }
        }
    });
}

/// Counts a revoked lease given up (`distlock_revocations_total{event="honoured"}`).
pub(crate) fn honoured(labels: &Labels) {
    labels.count_with(metric::REVOCATIONS_TOTAL, "event", "honoured");
}
