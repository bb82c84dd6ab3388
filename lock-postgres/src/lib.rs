#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

mod advisory;
mod batch;
mod config;
mod error;
mod executor;
mod fence;
mod grant;
mod inspect;
mod kinds;
mod listener;
mod lookalike;
mod pool;
mod postgres_lock;
mod sql;
mod statements;

pub use advisory::builder::{DEFAULT_ADVISORY_POOL_SIZE, PostgresAdvisoryLockBuilder};
pub use advisory::{PostgresAdvisoryLock, TransactionPooler, advisory_key};
pub use config::DEFAULT_POOL_SIZE;
pub use error::MissingTable;
#[cfg(feature = "sqlx")]
pub use fence::fence_sqlx;
pub use fence::{FENCE_TABLE, FENCED_SQLSTATE, fence};
pub use inspect::AdvisorySession;
pub use lookalike::{Lookalike, UnsupportedServer};
pub use sql::{CHANNEL, MIGRATION, SCHEMA_VERSION, TABLE, TURN_CHANNEL};
pub use statements::PreparedStatementsUnsupported;

lock_core::backend_exports! {
    lock: postgres_lock::PostgresLock,
    builder: config::PostgresLockBuilder,
    backend: error::BACKEND,
    connect_timeout: config::DEFAULT_CONNECT_TIMEOUT,
    operation_timeout: config::DEFAULT_OPERATION_TIMEOUT,
    max_note_bytes: lock_core::MAX_NOTE_BYTES,
    error: error::PostgresError,
    metric: lock_core::metric,
}

/// The pool crate `PostgresLock` is built on, re-exported so its version always matches.
pub use deadpool_postgres;
/// The PostgreSQL client `PostgresLock` is built on, re-exported so its version always matches.
pub use tokio_postgres;
