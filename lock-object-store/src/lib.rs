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

pub use config::{DEFAULT_OPERATION_TIMEOUT, ObjectStoreLockBuilder, parse_s3};
pub use error::{BACKEND, ObjectStoreError};
pub use fence::{FENCE_METADATA, fenced_put};
pub use inspect::LockObject;
pub use lock_core::{LockError, MAX_NOTE_BYTES};
pub use object_store_lock::ObjectStoreLock;

/// The `object_store` crate `ObjectStoreLock` is built on, re-exported so its version always
/// matches.
pub use object_store;
