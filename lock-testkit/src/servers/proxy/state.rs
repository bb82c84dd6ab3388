//! The fault state one [`FaultProxy`](super::FaultProxy) shares with its connections.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::watch;

/// What happens to bytes and connections right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    /// Bytes flow (after the configured latency).
    Flow,
    /// Bytes are held back; they flow again, in order, once the mode is `Flow`.
    Stall,
    /// Bytes are held back; connections that lived through it close when it ends.
    Partition,
    /// New connections are closed at once (open ones were closed on entry).
    Refuse,
}

/// A snapshot of the switches, published through a `watch` channel so that
/// every waiting connection wakes when any of them changes.
#[derive(Debug, Clone, Copy)]
pub(super) struct Faults {
    pub(super) mode: Mode,
    /// Added to every chunk, in each direction.
    pub(super) latency: Duration,
    /// Bumped to close every connection open at that moment.
    pub(super) resets: u64,
    /// Bumped by every `partition()`, so that a connection notices a
    /// partition even if it ended before the connection was next scheduled.
    pub(super) partitions: u64,
    /// Bumped by every `sever()`: a connection opened before the bump holds
    /// its bytes back for good (a link that died without a reset).
    pub(super) severs: u64,
    /// Set once, when the proxy is dropped.
    pub(super) shutdown: bool,
}

/// What a connection opened under `start` may do under the switches now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Fate {
    /// Bytes may flow.
    Flow,
    /// Bytes are held back for now.
    Hold,
    /// The connection must close and its held-back bytes be dropped.
    Close,
}

impl Faults {
    /// Whether bytes may flow.
    pub(super) fn flows(&self) -> bool {
        self.mode == Mode::Flow
    }

    /// The fate, under these switches, of a connection that was opened under `start`.
    ///
    /// Every step that moves bytes asks this just before it moves them, not only the task
    /// that closes the connection: the switches change on the test's thread while the proxy
    /// polls, so a heal can land between the closer's check and a writer's, and the writer
    /// must then not deliver what the partition held back.
    pub(super) fn fate(&self, start: &Faults) -> Fate {
        let reset = self.shutdown || self.resets != start.resets || self.mode == Mode::Refuse;
        // Comparing counters catches a partition that began and ended while the connection
        // was not looking.
        let lived_through_partition =
            start.mode == Mode::Partition || self.partitions != start.partitions;
        // A severed connection never flows again, whatever the mode: only a close ends it.
        let severed = self.severs != start.severs;
        if reset || (lived_through_partition && self.mode != Mode::Partition) {
            Fate::Close
        } else if self.flows() && !severed {
            Fate::Flow
        } else {
            Fate::Hold
        }
    }
}

/// Everything the control handle, the accept loop and the connections share.
#[derive(Debug)]
pub(super) struct Shared {
    pub(super) faults: watch::Sender<Faults>,
    upstream: Mutex<SocketAddr>,
    /// `cut_next_reply`'s pending byte count, taken by the first reply chunk.
    cut: Mutex<Option<usize>>,
    open: AtomicUsize,
}

impl Shared {
    pub(super) fn new(upstream: SocketAddr) -> Shared {
        let (faults, _) = watch::channel(Faults {
            mode: Mode::Flow,
            latency: Duration::ZERO,
            resets: 0,
            partitions: 0,
            severs: 0,
            shutdown: false,
        });
        Shared {
            faults,
            upstream: Mutex::new(upstream),
            cut: Mutex::new(None),
            open: AtomicUsize::new(0),
        }
    }

    pub(super) fn upstream(&self) -> SocketAddr {
        *self.upstream.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn set_upstream(&self, addr: SocketAddr) {
        *self.upstream.lock().unwrap_or_else(PoisonError::into_inner) = addr;
    }

    pub(super) fn set_cut(&self, cut: Option<usize>) {
        *self.cut.lock().unwrap_or_else(PoisonError::into_inner) = cut;
    }

    /// Takes the pending cut, if any: only one reply chunk is ever cut per call.
    pub(super) fn take_cut(&self) -> Option<usize> {
        self.cut
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    /// Changes the switches; `send_modify` works from any thread, with or
    /// without a runtime, and wakes every receiver.
    pub(super) fn update(&self, change: impl FnOnce(&mut Faults)) {
        self.faults.send_modify(change);
    }

    pub(super) fn open_connections(&self) -> usize {
        self.open.load(Ordering::SeqCst)
    }

    /// Counts one open client connection until the returned guard is dropped.
    pub(super) fn track(&self) -> OpenGuard<'_> {
        self.open.fetch_add(1, Ordering::SeqCst);
        OpenGuard(&self.open)
    }
}

/// Decrements the open-connection count when a connection task ends (or is
/// dropped with the runtime).
pub(super) struct OpenGuard<'a>(&'a AtomicUsize);

impl Drop for OpenGuard<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}
