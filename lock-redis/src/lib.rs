#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

mod admin;
mod config;
mod conn;
mod error;
mod holder;
mod kinds;
mod layout;
mod redis_lock;
mod replication;
mod scripts;
mod subscriber;
#[cfg(feature = "tls")]
mod tls;

pub use admin::{DerivedKey, LockKeys};
pub use config::{
    DEFAULT_COMMAND_TIMEOUT, DEFAULT_CONNECT_TIMEOUT, DEFAULT_FENCE_RETENTION, RedisLockBuilder,
};
pub use layout::{TOKEN_PREFIX, TokenValue, key_slot, token_value};
pub use lock_core::LockError;
pub use redis_lock::RedisLock;
pub use replication::{NotReplicated, ReplicaPolicy};

/// The pool crate `RedisLock` is built on, re-exported so its version always matches.
pub use deadpool_redis;
/// The Redis client `RedisLock` is built on, re-exported so its version always matches.
pub use redis;
