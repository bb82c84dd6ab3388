#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

mod client;
mod config;
mod error;
mod etcd_lock;
mod executor;
mod fence;
mod fixed_lease;
mod held;
mod inspect;
mod kinds;
mod layout;
mod members;
mod moving;
mod renew;
mod shared_lease;
mod watch;

pub use config::DEFAULT_PREFIX;

lock_core::backend_exports! {
    lock: etcd_lock::EtcdLock,
    builder: config::EtcdLockBuilder,
    backend: error::BACKEND,
    connect_timeout: config::DEFAULT_CONNECT_TIMEOUT,
    operation_timeout: config::DEFAULT_OPERATION_TIMEOUT,
    max_note_bytes: kinds::note::MAX_NOTE_BYTES,
    error: error::EtcdError,
    metric: lock_core::metric,
}

/// The etcd client `EtcdLock` is built on, re-exported so its version always matches.
pub use etcd_client;
