#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

mod advisory;
mod config;
mod error;
mod executor;
mod fence;
mod inspect;
mod kinds;
mod mysql_lock;
mod sql;

pub use advisory::{MAX_LOCK_NAME_CHARS, MysqlAdvisoryLock, advisory_name};
pub use config::{DEFAULT_ADVISORY_POOL_SIZE, DEFAULT_POOL_SIZE, MysqlAdvisoryLockBuilder};
pub use fence::{FENCE_TABLE, FENCED_SQLSTATE, fence};
pub use sql::{MIGRATION, SCHEMA_VERSION, TABLE};

lock_core::backend_exports! {
    lock: mysql_lock::MysqlLock,
    builder: config::MysqlLockBuilder,
    backend: error::BACKEND,
    connect_timeout: config::DEFAULT_CONNECT_TIMEOUT,
    operation_timeout: config::DEFAULT_OPERATION_TIMEOUT,
    max_note_bytes: lock_core::MAX_NOTE_BYTES,
    error: error::MissingTable,
    metric: lock_core::metric,
}

/// The client `MysqlLock` is built on, re-exported so its version always matches.
pub use sqlx;
