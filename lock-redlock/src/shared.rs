//! What every round of one `Redlock` shares: its nodes and settings, the acquires and releases
//! still in flight on them, and the notes of its leases. The rounds (acquire, extend, release,
//! ping, watch, the observers') use it; it uses none of them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use lock_core::Token;
use tokio::sync::watch;

use crate::node::Node;
use crate::releasing::Releasing;
use crate::settings::{Config, NODE_TIMEOUT_CEILING};

/// What every round of one `Redlock` shares.
pub(crate) struct Shared {
    pub(crate) nodes: Vec<Node>,
    pub(crate) config: Config,
    /// Leases granted while some nodes had not answered the acquire: per token, which nodes
    /// are still pending. A release waits for a node's attempt to finish before releasing the
    /// lease there, so each node gets one release, after its acquire.
    in_flight: Mutex<HashMap<Token, watch::Receiver<Vec<bool>>>>,
    /// Releases answered before every node finished them, per name: an acquire of the name
    /// sends its attempt to a node only once the node has finished them.
    pub(crate) releasing: Arc<Releasing>,
    /// Extend repairs still in flight, per name (the same registry as `releasing`): a release
    /// of the name sends its compare-and-delete to a node only once the repair there has
    /// finished, so a repair never lands after the release (see `crate::repair`).
    pub(crate) repairing: Arc<Releasing>,
    /// The last note record written beside each lease of this `Redlock` that is not released
    /// yet, per token: an extend repair writes it again on the node it repaired (a node that
    /// restarted empty lost it), so the grant stays named on every node that holds it.
    /// Bounded by [`NOTES_KEPT`].
    notes: Mutex<HashMap<Token, Arc<[u8]>>>,
}

/// The most note records a `Redlock` keeps for its repairs; past it a new record is not kept
/// (a repaired node then holds the lease without its note until the next `annotate`). Leases
/// are forgotten when released, so only leases never released (leaked) fill it.
const NOTES_KEPT: usize = 4096;

impl Shared {
    pub(crate) fn new(nodes: Vec<Node>, config: Config) -> Self {
        Self {
            nodes,
            config,
            in_flight: Mutex::new(HashMap::new()),
            releasing: Arc::default(),
            repairing: Arc::default(),
            notes: Mutex::default(),
        }
    }

    fn notes(&self) -> MutexGuard<'_, HashMap<Token, Arc<[u8]>>> {
        self.notes.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Keeps `record`, the note written beside the lease of `token`, for its repairs.
    pub(crate) fn keep_note(&self, token: Token, record: Arc<[u8]>) {
        let mut notes = self.notes();
        if notes.len() < NOTES_KEPT || notes.contains_key(&token) {
            notes.insert(token, record);
        }
    }

    /// The note record kept for the lease of `token`.
    pub(crate) fn note_of(&self, token: &Token) -> Option<Arc<[u8]>> {
        self.notes().get(token).cloned()
    }

    /// Forgets the note record of the lease of `token` (released, or no longer ours).
    pub(crate) fn forget_note(&self, token: &Token) {
        self.notes().remove(token);
    }

    fn in_flight(&self) -> MutexGuard<'_, HashMap<Token, watch::Receiver<Vec<bool>>>> {
        self.in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers a granted lease whose acquire is still pending on the nodes marked `true`; the
    /// round clears a node's mark when its attempt finishes and drops the sender at its end.
    pub(crate) fn track(&self, token: Token, pending: Vec<bool>) -> watch::Sender<Vec<bool>> {
        let (sender, receiver) = watch::channel(pending);
        self.in_flight().insert(token, receiver);
        sender
    }

    pub(crate) fn untrack(&self, token: &Token) {
        self.in_flight().remove(token);
    }

    pub(crate) fn pending_acquires(&self, token: &Token) -> Option<watch::Receiver<Vec<bool>>> {
        self.in_flight().get(token).cloned()
    }

    /// The bound of each node's release.
    pub(crate) fn release_timeout(&self) -> Duration {
        self.config.node_timeout.unwrap_or(NODE_TIMEOUT_CEILING)
    }
}
