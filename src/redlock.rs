//! Redlock (feature `redlock`): [`Redlock`], one lock over N independent Redis masters, granted
//! by a quorum, with everything lock-redlock exports: its timing defaults, errors and per-node
//! metric names ([`metric`]).

// Every name of lock-redlock resolves here through this glob, also one added or renamed there before
// the list below names it; hidden, because rustdoc would copy the client crates' whole
// documentation into this module's through a glob.
// While the list names everything, the glob brings nothing of its own: hence the allow.
#[doc(hidden)]
#[allow(unused_imports, unreachable_pub)]
pub use lock_redlock::*;

// The documented list: every public name of lock-redlock (the facade's `exports` test checks it
// against lock-redlock's lib.rs). Plain comments, not doc comments: a doc comment on a `pub use` is
// prepended to every re-exported item's own documentation.
pub use lock_redlock::{
    BACKEND, DEFAULT_DRIFT_CONSTANT, DEFAULT_DRIFT_FACTOR, LockError, MAX_NOTE_BYTES,
    NODE_TIMEOUT_CEILING, NODE_TIMEOUT_FLOOR, NODE_TIMEOUT_PERCENT, PING_TIMEOUT, QuorumNotReached,
    Redlock, RedlockBuilder, ValidityExpired, default_node_timeout, metric, quorum,
};
