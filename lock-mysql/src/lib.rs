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
pub use config::{
    DEFAULT_ADVISORY_POOL_SIZE, DEFAULT_CONNECT_TIMEOUT, DEFAULT_OPERATION_TIMEOUT,
    DEFAULT_POOL_SIZE, MysqlAdvisoryLockBuilder, MysqlLockBuilder,
};
pub use error::{BACKEND, MissingTable};
pub use fence::{FENCE_TABLE, FENCED_SQLSTATE, fence};
pub use lock_core::{LockError, MAX_NOTE_BYTES};
pub use mysql_lock::MysqlLock;
pub use sql::{MIGRATION, SCHEMA_VERSION, TABLE};

/// The client `MysqlLock` is built on, re-exported so its version always matches.
pub use sqlx;
