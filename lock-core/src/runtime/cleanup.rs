//! Background release for leases a dropped future or guard can no longer release itself.

use std::sync::Arc;

use crate::{Lease, Lock};

/// Holds a lease that must be released if this value is dropped while still armed: a guard
/// dropped without `release()`, an acquire or release future cancelled at an await point.
/// Safety rule 5: no future we return leaves a lock behind when dropped.
pub(crate) struct ReleaseOnDrop {
    lock: Arc<dyn Lock>,
    lease: Option<Lease>,
}

impl ReleaseOnDrop {
    pub(crate) fn new(lock: Arc<dyn Lock>, lease: Lease) -> Self {
        Self {
            lock,
            lease: Some(lease),
        }
    }

    /// The lease this releases when dropped armed.
    pub(crate) fn lease(&self) -> &Lease {
        self.lease
            .as_ref()
            .expect("armed until disarmed, which consumes it")
    }

    /// Dropping `self` afterwards releases nothing.
    pub(crate) fn disarm(mut self) {
        self.lease = None;
    }
}

impl Drop for ReleaseOnDrop {
    fn drop(&mut self) {
        if let Some(lease) = self.lease.take() {
            spawn_release(Arc::clone(&self.lock), lease);
        }
    }
}

/// Releases `lease` on the current tokio runtime without waiting for it. Outside a runtime the
/// lease is left to expire at the end of its TTL (logged at `warn`): dropping must never panic.
pub(crate) fn spawn_release(lock: Arc<dyn Lock>, lease: Lease) {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) => {
            drop(handle.spawn(async move {
                match lock.as_ref().release(&lease).await {
                    Ok(released) => tracing::debug!(
                        name = lease.name(),
                        backend = lock.backend(),
                        released,
                        "background release"
                    ),
                    Err(error) => tracing::warn!(
                        name = lease.name(),
                        backend = lock.backend(),
                        %error,
                        "background release failed; the lock expires at the end of its TTL"
                    ),
                }
            }));
        }
        Err(_) => tracing::warn!(
            name = lease.name(),
            backend = lock.backend(),
            "dropped outside a tokio runtime; the lock expires at the end of its TTL"
        ),
    }
}
