#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

mod acquire;
mod config;
mod error;
mod kinds;
mod node;
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
pub use redlock::{PING_TIMEOUT, Redlock};
pub use settings::{
    DEFAULT_DRIFT_CONSTANT, DEFAULT_DRIFT_FACTOR, NODE_TIMEOUT_CEILING, NODE_TIMEOUT_FLOOR,
    NODE_TIMEOUT_PERCENT, default_node_timeout,
};
pub use tally::quorum;
pub use telemetry::{
    METRIC_NODE_ERRORS, METRIC_NODE_GRANTS, METRIC_NODE_REFUSALS, METRIC_NODE_TIMEOUTS,
    METRIC_QUORUM, describe_metrics,
};
