//! Background release for leases a dropped future or guard can no longer release itself.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use crate::Lease;
use crate::backend::Lock;

/// A failed background release is logged at `warn` at most once per this period per process;
/// the others in between at `debug`, counted in the next warning. While a store is down, every
/// attempt that failed with an unknown outcome is released in the background and fails too:
/// one warning per attempt would flood the log for the whole outage.
const WARN_EVERY_MS: u64 = 10_000;

/// When the last failed-release warning was logged (ms since [`epoch`]; 0: never), and how many
/// were logged at `debug` since.
static LAST_WARNED_MS: AtomicU64 = AtomicU64::new(0);
static QUIETED: AtomicU64 = AtomicU64::new(0);

/// The process's reference instant for [`LAST_WARNED_MS`].
fn epoch() -> Instant {
    static EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

/// Whether this failed release gets the warning (the first, or the first after
/// [`WARN_EVERY_MS`]), and how many were quieted before it.
fn take_warning() -> Option<u64> {
    let now_ms = u64::try_from(epoch().elapsed().as_millis())
        .unwrap_or(u64::MAX)
        .max(1);
    let last = LAST_WARNED_MS.load(Ordering::Relaxed);
    let due = last == 0 || now_ms.saturating_sub(last) >= WARN_EVERY_MS;
    if due
        && LAST_WARNED_MS
            .compare_exchange(last, now_ms, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    {
        Some(QUIETED.swap(0, Ordering::Relaxed))
    } else {
        QUIETED.fetch_add(1, Ordering::Relaxed);
        None
    }
}

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
                    Err(error) => match take_warning() {
                        Some(quieted) => tracing::warn!(
                            name = lease.name(),
                            backend = lock.backend(),
                            %error,
                            quieted,
                            "background release failed; the lock expires at the end of its TTL \
                             (`quieted`: failures since the last such warning, logged at debug)"
                        ),
                        None => tracing::debug!(
                            name = lease.name(),
                            backend = lock.backend(),
                            %error,
                            "background release failed; the lock expires at the end of its TTL"
                        ),
                    },
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_of_failed_releases_warns_once() {
        let first = take_warning();
        let burst: Vec<_> = (0..50).map(|_| take_warning()).collect();
        // Another test of this process may have taken the warning just before: either way, at
        // most one of the 51 is a warning, and the rest are counted for the next one.
        let warned = usize::from(first.is_some()) + burst.iter().filter(|w| w.is_some()).count();
        assert!(warned <= 1, "{warned} warnings in one burst");
    }
}
