#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

mod client;
mod config;
mod error;
mod etcd_lock;
mod executor;
mod fair;
mod layout;
mod note;
mod read_write;
mod semaphore;
mod watch;

pub use config::{
    DEFAULT_COMMAND_TIMEOUT, DEFAULT_CONNECT_TIMEOUT, DEFAULT_PREFIX, EtcdLockBuilder,
};
pub use etcd_lock::EtcdLock;
pub use lock_core::LockError;
pub use note::MAX_NOTE_BYTES;

/// The etcd client `EtcdLock` is built on, re-exported so its version always matches.
pub use etcd_client;
