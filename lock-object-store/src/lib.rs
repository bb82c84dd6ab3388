#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

mod body;
mod config;
mod error;
mod fence;
mod grant;
mod held;
mod inspect;
mod object_store_lock;
mod observe;
mod probe;
mod rewrite;
mod shared;
mod store;

pub use config::parse_s3;
pub use fence::{FENCE_METADATA, fenced_put};
pub use inspect::LockObject;

lock_core::backend_exports! {
    lock: object_store_lock::ObjectStoreLock,
    builder: config::ObjectStoreLockBuilder,
    backend: error::BACKEND,
    operation_timeout: config::DEFAULT_OPERATION_TIMEOUT,
    max_note_bytes: lock_core::MAX_NOTE_BYTES,
    error: error::ObjectStoreError,
    metric: lock_core::metric,
}

/// The `object_store` crate `ObjectStoreLock` is built on, re-exported so its version always
/// matches.
pub use object_store;
