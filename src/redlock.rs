//! Redlock (feature `redlock`): [`Redlock`], one lock over N independent Redis masters, granted
//! by a quorum; its timing defaults, its per-node metrics and its errors.
//!
//! The lock type and its builder are also at the crate root ([`crate::Redlock`]); the settings
//! and helpers keep their own names here (`distlock::redlock::PING_TIMEOUT`), as
//! `sqlx::postgres` does.

// Plain comments, not doc comments: a doc comment on a `pub use` is prepended to every
// re-exported item's own documentation.
pub use lock_redlock::{
    DEFAULT_DRIFT_CONSTANT, DEFAULT_DRIFT_FACTOR, NODE_TIMEOUT_CEILING, NODE_TIMEOUT_FLOOR,
    NODE_TIMEOUT_PERCENT, PING_TIMEOUT, QuorumNotReached, Redlock, RedlockBuilder, ValidityExpired,
    default_node_timeout, quorum,
};
// The per-node series, next to the `Locker`'s (`distlock::metric`).
pub use lock_redlock::{
    METRIC_NODE_ERRORS, METRIC_NODE_GRANTS, METRIC_NODE_REFUSALS, METRIC_NODE_TIMEOUTS,
    METRIC_QUORUM, describe_metrics,
};
