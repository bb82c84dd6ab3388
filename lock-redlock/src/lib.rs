#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

mod acquire;
mod config;
mod error;
mod holders;
mod inspect;
mod kinds;
pub mod metric;
mod node;
mod record;
mod redlock;
mod releasing;
mod repair;
mod round;
mod settings;
mod shared;
mod tally;
mod telemetry;
mod watch;

pub use error::ValidityExpired;
pub use redlock::PING_TIMEOUT;
pub use settings::{
    DEFAULT_DRIFT_CONSTANT, DEFAULT_DRIFT_FACTOR, NODE_TIMEOUT_CEILING, NODE_TIMEOUT_FLOOR,
    NODE_TIMEOUT_PERCENT, default_node_timeout,
};
pub use tally::quorum;

lock_core::backend_exports! {
    lock: redlock::Redlock,
    builder: config::RedlockBuilder,
    backend: error::BACKEND,
    max_note_bytes: record::MAX_NOTE_BYTES,
    error: error::QuorumNotReached,
}
