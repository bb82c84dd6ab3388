#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

#[cfg(feature = "cluster")]
mod cluster_grace;
mod config;
mod conn;
mod error;
mod executor;
mod facts;
mod fences;
mod grace;
mod holder;
mod kinds;
mod layout;
pub mod metric;
mod native;
mod redis_lock;
mod replication;
mod scripts;
mod settings;
mod slot;
mod source;
mod subscriber;
#[cfg(feature = "tls")]
mod tls;
mod topology;
mod tracker;
mod units;

#[cfg(feature = "cluster")]
pub use cluster_grace::CLUSTER_GRACE_REFRESH;
pub use config::RedisLockBuilder;
pub use fences::{FencedScript, LIBRARY_VERSION, LibraryLoad, RECORD_SUFFIX, RedisFences};
pub use grace::{DEFAULT_GRACE, EvictionRisk};
pub use holder::HolderReplies;
pub use kinds::note::MAX_NOTE_BYTES;
pub use layout::{DerivedKey, LockKeys, TOKEN_PREFIX, TokenValue, token_value};
pub use lock_core::LockError;
pub use redis_lock::RedisLock;
pub use replication::{NotReplicated, ReplicaPolicy};
pub use settings::{
    DEFAULT_COMMAND_TIMEOUT, DEFAULT_CONNECT_TIMEOUT, DEFAULT_FENCE_RETENTION,
    DEFAULT_SUBSCRIBER_PING_INTERVAL, DEFAULT_TRACK_LOSSES_AFTER,
};
pub use slot::key_slot;
pub use topology::Topology;

/// The pool crate `RedisLock` is built on, re-exported so its version always matches.
pub use deadpool_redis;
/// The Redis client `RedisLock` is built on, re-exported so its version always matches.
pub use redis;
