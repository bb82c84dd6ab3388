//! Turning tokio-postgres and pool errors into [`LockError`]s.

use std::fmt;
use std::time::Duration;

use lock_core::{LockError, Op, TimeoutPhase};
use tokio_postgres::error::SqlState;

/// The label of this backend in errors, logs and metrics (the `backend` label; what
/// `Lock::backend` answers).
pub const BACKEND: &str = "postgres";

/// The lock's schema is missing or older than this crate needs: a table of it, or one of its
/// functions (a database migrated to version 1 that is asked for a read-write lock, a semaphore
/// or a fair lock; one of version 3 asked for [`fence`](crate::fence)), does not exist. The
/// source of the [`LockError::Backend`] (not retryable) that a lock operation or a fence returns
/// before the migration was run. The message says how to create or upgrade it.
#[derive(Debug)]
pub struct MissingTable {
    /// The server's answer, with its SQLSTATE code.
    described: String,
    /// The client's error (tokio-postgres's, or sqlx's for [`fence_sqlx`](crate::fence)).
    source: Box<dyn std::error::Error + Send + Sync>,
}

impl MissingTable {
    /// The schema is missing, as the client's error `source` (described as `described`) says.
    pub(crate) fn new(described: String, source: Box<dyn std::error::Error + Send + Sync>) -> Self {
        Self { described, source }
    }
}

impl fmt::Display for MissingTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the lock's schema (the lease table `{}` and the fence `distlock_fence`, version {}) \
             is missing or older: run `distlock migrate postgres://...`, \
             `PostgresLock::migrate()` or the SQL in `lock_postgres::MIGRATION` once ({})",
            crate::sql::TABLE,
            crate::sql::SCHEMA_VERSION,
            self.described
        )
    }
}

impl std::error::Error for MissingTable {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.source)
    }
}

/// A failure reported by PostgreSQL or its client: the source of a [`LockError::Backend`] from
/// `PostgresLock`. Its message carries the server's own (with the SQLSTATE code), which
/// tokio-postgres keeps in its error's source; [`PostgresError::inner`] gives the client's error.
#[derive(Debug)]
pub struct PostgresError(tokio_postgres::Error);

impl PostgresError {
    /// The client library's error (`code()`, `as_db_error()`, `is_closed()`).
    #[must_use]
    pub fn inner(&self) -> &tokio_postgres::Error {
        &self.0
    }

    /// The SQLSTATE code, when the server sent one.
    #[must_use]
    pub fn code(&self) -> Option<&SqlState> {
        self.0.code()
    }
}

impl fmt::Display for PostgresError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        Describe(&self.0).fmt(f)
    }
}

/// `err` with the server's message (and SQLSTATE code).
pub(crate) fn describe(err: &tokio_postgres::Error) -> String {
    Describe(err).to_string()
}

/// A tokio-postgres error with the server's message, which its own `Display` leaves out.
struct Describe<'a>(&'a tokio_postgres::Error);

impl fmt::Display for Describe<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.as_db_error() {
            Some(db) => write!(
                f,
                "{} ({}): {}",
                db.severity(),
                db.code().code(),
                db.message()
            ),
            None => match std::error::Error::source(&self.0) {
                Some(cause) => write!(f, "{}: {cause}", self.0),
                None => write!(f, "{}", self.0),
            },
        }
    }
}

impl std::error::Error for PostgresError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0)
    }
}

/// Maps a failed statement or connection attempt.
pub(crate) fn from_pg(err: tokio_postgres::Error, op: Op) -> LockError {
    if err.code() == Some(&SqlState::UNDEFINED_TABLE)
        || err.code() == Some(&SqlState::UNDEFINED_FUNCTION)
    {
        return LockError::Backend {
            backend: BACKEND,
            op,
            retryable: false,
            source: Box::new(MissingTable::new(describe(&err), Box::new(err))),
        };
    }
    LockError::Backend {
        backend: BACKEND,
        op,
        retryable: retryable(&err),
        source: Box::new(PostgresError(err)),
    }
}

/// Whether the same call can succeed later: I/O trouble, a closed connection, a server starting
/// up or shutting down, too many connections, a serialization failure or deadlock. Wrong
/// credentials, missing rights, a missing table or function and other errors cannot.
pub(crate) fn retryable(err: &tokio_postgres::Error) -> bool {
    let Some(code) = err.code() else {
        // No SQLSTATE: I/O, a closed connection, a protocol hiccup.
        return true;
    };
    retryable_code(code.code())
}

/// Whether an error with SQLSTATE `code` may not recur (see [`retryable`]).
pub(crate) fn retryable_code(code: &str) -> bool {
    // 08: connection exception; 53: insufficient resources (too many connections);
    // 57P01..03: admin/crash shutdown, cannot connect now (starting up); 57014: cancelled;
    // 40001 / 40P01: serialization failure, deadlock; 55P03: lock not available.
    code.starts_with("08")
        || code.starts_with("53")
        || matches!(
            code,
            "57P01" | "57P02" | "57P03" | "57014" | "40001" | "40P01" | "55P03"
        )
}

/// Maps a failure to get a pooled connection.
pub(crate) fn from_pool(err: deadpool_postgres::PoolError, elapsed: Duration) -> LockError {
    use deadpool_postgres::PoolError;
    match err {
        PoolError::Backend(err) => from_pg(err, Op::Connect),
        PoolError::Timeout(_) => timeout(TimeoutPhase::Connect, elapsed),
        other => LockError::Backend {
            backend: BACKEND,
            op: Op::Connect,
            retryable: !matches!(other, PoolError::Closed | PoolError::NoRuntimeSpecified),
            source: Box::new(other),
        },
    }
}

pub(crate) fn timeout(phase: TimeoutPhase, elapsed: Duration) -> LockError {
    LockError::Timeout { phase, elapsed }
}

/// A reply of a shape the statement cannot produce (a bug, or a table altered by hand).
pub(crate) fn unexpected(op: Op, what: impl fmt::Display) -> LockError {
    LockError::Backend {
        backend: BACKEND,
        op,
        retryable: false,
        source: format!("unexpected reply: {what}").into(),
    }
}
