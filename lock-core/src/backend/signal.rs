//! Release signals: how a waiter learns that a lock it waits for was released.

use std::any::Any;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::Notify;

/// A counter of releases of one name, with a way to wait for the next one.
///
/// A waiter reads [`ReleaseSignal::generation`] *before* its acquire attempt and, if the lock
/// was busy, awaits [`ReleaseSignal::changed_since`] that generation: a release that lands
/// between the busy answer and the wait is therefore never missed.
#[derive(Clone, Default)]
pub struct ReleaseSignal(Arc<Inner>);

#[derive(Default)]
struct Inner {
    generation: AtomicU64,
    notify: Notify,
}

impl ReleaseSignal {
    /// A signal no release has been announced on.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Announces a release: bumps the generation and wakes every waiter.
    pub fn notify(&self) {
        self.0.generation.fetch_add(1, Ordering::AcqRel);
        self.0.notify.notify_waiters();
    }

    /// How many releases were announced so far.
    #[must_use]
    pub fn generation(&self) -> u64 {
        self.0.generation.load(Ordering::Acquire)
    }

    /// Resolves once a release was announced after `generation` was read.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn changed_since(&self, generation: u64) {
        loop {
            let notified = self.0.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.generation() != generation {
                return;
            }
            notified.await;
        }
    }
}

impl fmt::Debug for ReleaseSignal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReleaseSignal")
            .field("generation", &self.generation())
            .finish()
    }
}

/// A backend's subscription to the releases of one name, from [`Lock::watch`](crate::backend::Lock::watch).
///
/// The backend bumps [`ReleaseWatch::signal`] whenever it learns of a release of the name (from
/// any process). Dropping the watch ends the subscription (the backend's `keep` value is
/// dropped with it).
pub struct ReleaseWatch {
    signal: ReleaseSignal,
    _keep: Box<dyn Any + Send + Sync>,
}

impl ReleaseWatch {
    /// A watch whose `signal` the backend bumps on every release; `keep` is dropped when the
    /// watch is (to unsubscribe).
    pub fn new(signal: ReleaseSignal, keep: impl Any + Send + Sync) -> Self {
        Self {
            signal,
            _keep: Box::new(keep),
        }
    }

    /// The signal of this name's releases.
    #[must_use]
    pub fn signal(&self) -> &ReleaseSignal {
        &self.signal
    }
}

impl fmt::Debug for ReleaseWatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReleaseWatch")
            .field("signal", &self.signal)
            .finish_non_exhaustive()
    }
}
