//! The PostgreSQL backend (feature `postgres`): [`PostgresLock`], a lease table (every lock
//! kind) whose releases are announced with LISTEN/NOTIFY, and its opt-in advisory mode
//! [`PostgresAdvisoryLock`] (session advisory locks with sqlx's keys, the mutex only); their
//! defaults, the schema's SQL and errors.
//!
//! The lock types and their builders are also at the crate root ([`crate::PostgresLock`]); the
//! settings and helpers keep their own names here (`distlock::postgres::DEFAULT_POOL_SIZE`), as
//! `sqlx::postgres` does.

// Plain comments, not doc comments: a doc comment on a `pub use` is prepended to every
// re-exported item's own documentation.
pub use lock_postgres::{
    CHANNEL, DEFAULT_CONNECT_TIMEOUT, DEFAULT_POOL_SIZE, DEFAULT_STATEMENT_TIMEOUT, Lookalike,
    MIGRATION, MissingTable, PostgresError, PostgresLock, PostgresLockBuilder,
    PreparedStatementsUnsupported, SCHEMA_VERSION, TABLE, TURN_CHANNEL, UnsupportedServer,
};
// The advisory mode.
pub use lock_postgres::{
    DEFAULT_ADVISORY_POOL_SIZE, PostgresAdvisoryLock, PostgresAdvisoryLockBuilder,
    TransactionPooler, advisory_key,
};
