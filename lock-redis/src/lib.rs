#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

mod config;
mod connection;
mod error;
mod executor;
mod feeds;
mod fences;
mod holder;
mod inspect;
mod kinds;
mod layout;
pub mod metric;
mod redis_lock;
mod safety;
mod scripts;
mod settings;
mod topology;
mod units;

pub use connection::replication::{NotReplicated, ReplicaPolicy};
pub use error::NotRedis;
pub use fences::{FencedScript, LIBRARY_VERSION, LibraryLoad, RECORD_SUFFIX, RedisFences};
pub use holder::HolderReplies;
pub use layout::slot::key_slot;
pub use layout::{DerivedKey, LockKeys, TOKEN_PREFIX, TokenValue, token_value};
#[cfg(feature = "cluster")]
pub use safety::cluster_grace::CLUSTER_GRACE_REFRESH;
pub use safety::grace::{DEFAULT_GRACE, EvictionRisk};
pub use settings::{
    DEFAULT_FENCE_RETENTION, DEFAULT_SUBSCRIBER_PING_INTERVAL, DEFAULT_TRACK_LOSSES_AFTER,
};

lock_core::backend_exports! {
    lock: redis_lock::RedisLock,
    builder: config::RedisLockBuilder,
    backend: error::BACKEND,
    connect_timeout: settings::DEFAULT_CONNECT_TIMEOUT,
    operation_timeout: settings::DEFAULT_OPERATION_TIMEOUT,
    max_note_bytes: kinds::note::MAX_NOTE_BYTES,
}
pub use topology::Topology;

/// The pool crate `RedisLock` is built on, re-exported so its version always matches.
pub use deadpool_redis;
/// The Redis client `RedisLock` is built on, re-exported so its version always matches.
pub use redis;
