#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

mod acquire;
mod config;
mod error;
mod holders;
mod kinds;
pub mod metric;
mod node;
mod note;
mod redlock;
mod releasing;
mod repair;
mod round;
mod settings;
mod shared;
mod tally;
mod telemetry;
mod watch;

pub use config::RedlockBuilder;
pub use error::{BACKEND, QuorumNotReached, ValidityExpired};
pub use lock_core::LockError;
pub use note::MAX_NOTE_BYTES;
pub use redlock::{PING_TIMEOUT, Redlock};
pub use settings::{
    DEFAULT_DRIFT_CONSTANT, DEFAULT_DRIFT_FACTOR, NODE_TIMEOUT_CEILING, NODE_TIMEOUT_FLOOR,
    NODE_TIMEOUT_PERCENT, default_node_timeout,
};
pub use tally::quorum;

// The metric names from before the `metric` module, for one release.
/// The per-node grant counter: use [`metric::NODE_GRANTS`].
#[deprecated(note = "use `lock_redlock::metric::NODE_GRANTS`")]
pub const METRIC_NODE_GRANTS: &str = metric::NODE_GRANTS;
/// The per-node refusal counter: use [`metric::NODE_REFUSALS`].
#[deprecated(note = "use `lock_redlock::metric::NODE_REFUSALS`")]
pub const METRIC_NODE_REFUSALS: &str = metric::NODE_REFUSALS;
/// The per-node timeout counter: use [`metric::NODE_TIMEOUTS`].
#[deprecated(note = "use `lock_redlock::metric::NODE_TIMEOUTS`")]
pub const METRIC_NODE_TIMEOUTS: &str = metric::NODE_TIMEOUTS;
/// The per-node error counter: use [`metric::NODE_ERRORS`].
#[deprecated(note = "use `lock_redlock::metric::NODE_ERRORS`")]
pub const METRIC_NODE_ERRORS: &str = metric::NODE_ERRORS;
/// The round outcome counter: use [`metric::QUORUM`].
#[deprecated(note = "use `lock_redlock::metric::QUORUM`")]
pub const METRIC_QUORUM: &str = metric::QUORUM;
/// Registers the descriptions of Redlock's counters: use [`metric::describe`].
#[deprecated(note = "use `lock_redlock::metric::describe`")]
pub fn describe_metrics() {
    metric::describe();
}
