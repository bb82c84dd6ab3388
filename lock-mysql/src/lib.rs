#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

mod advisory;
mod config;
mod error;
mod executor;
mod fence;
mod kinds;
mod sql;
mod table;

pub use advisory::{MAX_LOCK_NAME_CHARS, MysqlAdvisoryLock, advisory_name};
pub use config::{
    DEFAULT_ADVISORY_POOL_SIZE, DEFAULT_CONNECT_TIMEOUT, DEFAULT_POOL_SIZE,
    DEFAULT_STATEMENT_TIMEOUT, MysqlAdvisoryLockBuilder, MysqlLockBuilder,
};
pub use error::MissingTable;
pub use fence::{FENCE_TABLE, FENCED_SQLSTATE, fence};
pub use lock_core::LockError;
pub use sql::{MIGRATION, SCHEMA_VERSION, TABLE};
pub use table::MysqlLock;

/// The client `MysqlLock` is built on, re-exported so its version always matches.
pub use sqlx;
