//! A request's stop signal ([`LockRequest::stop_on`](crate::LockRequest::stop_on),
//! [`MultiRequest::stop_on`](crate::MultiRequest::stop_on)), the same for a single name and a
//! multi-lock.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Mutex, PoisonError};

/// A stop signal, boxed: any future the caller hands to `stop_on`.
pub(super) type Signal = Pin<Box<dyn Future<Output = ()> + Send>>;

/// The slot of a request's stop signal. In a mutex only so that the request stays `Sync` (its
/// futures borrow it across awaits); the signal is only ever taken out by value
/// ([`Stop::take`], through `get_mut`), never locked.
#[derive(Default)]
pub(super) struct Stop(Mutex<Option<Signal>>);

impl Stop {
    /// Ties the request to `signal`.
    pub(super) fn set(&mut self, signal: impl Future<Output = ()> + Send + 'static) {
        *self.slot() = Some(Box::pin(signal));
    }

    /// The signal, taken out: the request's run or acquire awaits it.
    pub(super) fn take(&mut self) -> Option<Signal> {
        self.slot().take()
    }

    /// Whether the request is tied to a signal (for `Debug`).
    pub(super) fn is_set(&self) -> bool {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some()
    }

    fn slot(&mut self) -> &mut Option<Signal> {
        self.0.get_mut().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Resolves when `signal` does; never without one.
pub(super) async fn stopped(signal: &mut Option<Signal>) {
    match signal {
        Some(signal) => signal.as_mut().await,
        None => std::future::pending().await,
    }
}
