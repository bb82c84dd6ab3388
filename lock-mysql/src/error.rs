//! Turning sqlx errors into [`LockError`]s.

use std::fmt;
use std::time::Duration;

use lock_core::{LockError, Op, TimeoutPhase};
use sqlx::mysql::MySqlDatabaseError;

/// The label of this backend in errors, logs and metrics (the `backend` label; what
/// `Lock::backend` answers).
pub const BACKEND: &str = "mysql";

/// `ER_NO_SUCH_TABLE`: a table of the schema is missing.
const NO_SUCH_TABLE: u16 = 1146;

/// `ER_BAD_FIELD_ERROR`: a column of the schema is missing (a schema of an earlier version).
const NO_SUCH_COLUMN: u16 = 1054;

/// The lock's schema is missing or out of date: a table of it does not exist, or a column of
/// this version ([`SCHEMA_VERSION`](crate::SCHEMA_VERSION)). The source of the
/// [`LockError::Backend`] (not retryable) that a lock operation returns before the migration
/// was run. The message says how to create it.
#[derive(Debug)]
pub struct MissingTable {
    source: sqlx::Error,
}

impl MissingTable {
    /// The schema is missing, as `source` (the server's answer) says.
    pub(crate) fn new(source: sqlx::Error) -> Self {
        Self { source }
    }
}

impl fmt::Display for MissingTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the lock's schema (the lease table `{}`, version {}) is missing or out of date: run \
             `distlock migrate mysql://...`, `MysqlLock::migrate()` or the SQL in \
             `lock_mysql::MIGRATION` once ({})",
            crate::sql::TABLE,
            crate::sql::SCHEMA_VERSION,
            self.source
        )
    }
}

impl std::error::Error for MissingTable {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// Whether `err` says a table of the schema does not exist (not merely out of date).
pub(crate) fn no_such_table(err: &LockError) -> bool {
    match err {
        LockError::Backend { source, .. } => source
            .downcast_ref::<MissingTable>()
            .is_some_and(|missing| number(&missing.source) == Some(NO_SUCH_TABLE)),
        _ => false,
    }
}

/// The server's error number, when the server sent one.
pub(crate) fn number(err: &sqlx::Error) -> Option<u16> {
    match err {
        sqlx::Error::Database(db) => db
            .try_downcast_ref::<MySqlDatabaseError>()
            .map(MySqlDatabaseError::number),
        _ => None,
    }
}

/// Maps a failed statement or connection attempt.
pub(crate) fn from_sqlx(err: sqlx::Error, op: Op) -> LockError {
    if matches!(number(&err), Some(NO_SUCH_TABLE | NO_SUCH_COLUMN)) {
        return LockError::Backend {
            backend: BACKEND,
            op,
            retryable: false,
            source: Box::new(MissingTable::new(err)),
        };
    }
    if matches!(err, sqlx::Error::PoolTimedOut) {
        return LockError::Timeout {
            phase: TimeoutPhase::Connect,
            elapsed: Duration::ZERO,
        };
    }
    LockError::Backend {
        backend: BACKEND,
        op,
        retryable: retryable(&err),
        source: Box::new(err),
    }
}

/// Whether the same call can succeed later: I/O trouble, a closed or killed connection, a
/// server shutting down, too many connections, a deadlock or lock wait timeout. Wrong
/// credentials, missing rights, a missing table and other errors cannot.
pub(crate) fn retryable(err: &sqlx::Error) -> bool {
    match err {
        sqlx::Error::Database(_) => matches!(
            number(err),
            // 1040 too many connections, 1053 server shutdown, 1205 lock wait timeout,
            // 1213 deadlock, 1927 connection killed, 2006 gone away, 2013 lost connection,
            // 4031 (MySQL) disconnected by the server for inactivity.
            Some(1040 | 1053 | 1205 | 1213 | 1927 | 2006 | 2013 | 4031)
        ),
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::Protocol(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::WorkerCrashed => true,
        _ => false,
    }
}

/// Whether `err` says the connection (its server session) is gone: I/O failure, a protocol
/// break, or the server's word that it killed or dropped the session.
pub(crate) fn session_gone(err: &sqlx::Error) -> bool {
    match err {
        sqlx::Error::Io(_) | sqlx::Error::Protocol(_) | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(_) => matches!(number(err), Some(1053 | 1927 | 2006 | 2013 | 4031)),
        _ => false,
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
