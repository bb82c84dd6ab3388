//! The process's stop signal, for tying a lock or an election to it in one call
//! ([`LockRequest::stop_on`](crate::LockRequest::stop_on),
//! [`ElectionRun::stop_on`](crate::ElectionRun::stop_on)): client-go's `ReleaseOnCancel`.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once any [`shutdown`] future saw the signal: a `shutdown()` made afterwards resolves at
/// once, instead of waiting for a second signal.
static SEEN: AtomicBool = AtomicBool::new(false);

/// A future that resolves when the process is asked to stop: SIGTERM (what Kubernetes, systemd
/// and `docker stop` send) or SIGINT (Ctrl-C), and at once when one of them arrived before.
/// Hand it to [`LockRequest::stop_on`](crate::LockRequest::stop_on) or
/// [`ElectionRun::stop_on`](crate::ElectionRun::stop_on) so that a lock or a leader's term is
/// released when the process is told to stop, instead of running out a lease later; and to
/// your server's graceful shutdown (axum's `with_graceful_shutdown`).
///
/// The signals are listened to from this call on (tokio's signal handling, in the current
/// runtime). **Once listened to, SIGTERM and SIGINT no longer end the process by themselves**
/// (tokio's handlers stay for the rest of its life): the program must then return from `main`
/// after its own shutdown, as a graceful server does anyway. Where a listener cannot be set up
/// (no tokio signal driver), the future never resolves and a warning is logged.
///
/// On platforms other than Unix, only Ctrl-C.
///
/// # Panics
/// Outside a tokio runtime.
pub fn shutdown() -> impl Future<Output = ()> + Send + 'static {
    let signals = Signals::listen();
    async move {
        if SEEN.load(Ordering::Acquire) {
            return;
        }
        match signals {
            Some(mut signals) => {
                signals.recv().await;
                SEEN.store(true, Ordering::Release);
                tracing::info!("stop signal received: releasing the locks and terms tied to it");
            }
            None => std::future::pending().await,
        }
    }
}

#[cfg(unix)]
struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

#[cfg(unix)]
impl Signals {
    fn listen() -> Option<Self> {
        use tokio::signal::unix::{SignalKind, signal};
        match (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) {
            (Ok(term), Ok(int)) => Some(Self { term, int }),
            (Err(error), _) | (_, Err(error)) => {
                tracing::warn!(%error, "cannot listen to SIGTERM and SIGINT; shutdown() never resolves");
                None
            }
        }
    }

    async fn recv(&mut self) {
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.int.recv() => {}
        }
    }
}

#[cfg(not(unix))]
struct Signals;

#[cfg(not(unix))]
impl Signals {
    fn listen() -> Option<Self> {
        Some(Self)
    }

    async fn recv(&mut self) {
        if let Err(error) = tokio::signal::ctrl_c().await {
            tracing::warn!(%error, "cannot listen to Ctrl-C; shutdown() never resolves");
            std::future::pending::<()>().await;
        }
    }
}
