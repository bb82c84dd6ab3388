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

pub use config::RedisLockBuilder;
pub use connection::replication::{NotReplicated, ReplicaPolicy};
pub use error::{BACKEND, NotRedis};
pub use fences::{FencedScript, LIBRARY_VERSION, LibraryLoad, RECORD_SUFFIX, RedisFences};
pub use holder::HolderReplies;
pub use kinds::note::MAX_NOTE_BYTES;
pub use layout::slot::key_slot;
pub use layout::{DerivedKey, LockKeys, TOKEN_PREFIX, TokenValue, token_value};
pub use lock_core::LockError;
pub use redis_lock::RedisLock;
#[cfg(feature = "cluster")]
pub use safety::cluster_grace::CLUSTER_GRACE_REFRESH;
pub use safety::grace::{DEFAULT_GRACE, EvictionRisk};
pub use settings::{
    DEFAULT_CONNECT_TIMEOUT, DEFAULT_FENCE_RETENTION, DEFAULT_OPERATION_TIMEOUT,
    DEFAULT_SUBSCRIBER_PING_INTERVAL, DEFAULT_TRACK_LOSSES_AFTER,
};
pub use topology::Topology;

/// The pool crate `RedisLock` is built on, re-exported so its version always matches.
pub use deadpool_redis;
/// The Redis client `RedisLock` is built on, re-exported so its version always matches.
pub use redis;
