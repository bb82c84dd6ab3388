#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

mod client;
mod config;
mod error;
mod etcd_lock;
mod executor;
mod fence;
mod held;
mod inspect;
mod kinds;
mod layout;
mod members;
mod renew;
mod shared_lease;
mod watch;

pub use config::{
    DEFAULT_CONNECT_TIMEOUT, DEFAULT_OPERATION_TIMEOUT, DEFAULT_PREFIX, EtcdLockBuilder,
};
pub use error::{BACKEND, EtcdError};
pub use etcd_lock::EtcdLock;
pub use kinds::note::MAX_NOTE_BYTES;
pub use lock_core::LockError;

/// The etcd client `EtcdLock` is built on, re-exported so its version always matches.
pub use etcd_client;
