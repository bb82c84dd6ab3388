//! What a store says about the current holder of a mutex: [`Lock::describe_holder`](crate::backend::Lock::describe_holder).

use std::sync::Arc;
use std::time::Duration;

/// The current holder of a mutex as the store saw it at one moment: its fencing token, how
/// long its lease has left, and the note it wrote beside the lock
/// ([`Lock::annotate`](crate::backend::Lock::annotate)), if any. Never the holder's token,
/// which proves ownership.
///
/// `#[non_exhaustive]`: a backend builds one with [`Holder::new`] and the `with_*` methods.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Holder {
    /// The fencing token of the holder's grant (the election's *term*).
    pub fencing_token: u64,
    /// The holder's remaining TTL; `None` when the store cannot tell or the key never expires.
    pub ttl: Option<Duration>,
    /// The note written beside this grant, `None` when the holder wrote none (yet). It belongs
    /// to this grant: a new grant of the name starts without one.
    pub note: Option<Arc<[u8]>>,
}

impl Holder {
    /// A holder whose grant carries `fencing_token`, with `ttl` left and no note.
    #[must_use]
    pub fn new(fencing_token: u64, ttl: Option<Duration>) -> Self {
        Self {
            fencing_token,
            ttl,
            note: None,
        }
    }

    /// The same holder, with the note written beside its grant.
    #[must_use]
    pub fn with_note(mut self, note: impl Into<Arc<[u8]>>) -> Self {
        self.note = Some(note.into());
        self
    }
}
