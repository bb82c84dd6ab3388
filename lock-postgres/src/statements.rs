//! How the lease table's statements reach the server: prepared once per pooled connection
//! (the default), or sent unnamed each time for poolers that cannot keep prepared statements.

use std::fmt;

use deadpool_postgres::Object;
use lock_core::{LockError, Op};
use tokio_postgres::error::SqlState;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{Error, Row};

use crate::error::{BACKEND, from_pg};

/// Whether statements are prepared (and cached per pooled connection) or sent unnamed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Statements {
    /// Parsed and planned once per connection (`prepare_typed_cached`): the server skips
    /// parsing on every later call. Needs the server connection to keep them: direct, a pooler
    /// in session mode, or one with protocol-level prepared statements (PgBouncer ≥ 1.21 with
    /// `max_prepared_statements`).
    Prepared,
    /// One unnamed statement per call (`query_typed`): parsed and planned every time, but no
    /// session state, so any pooler will do.
    Unnamed,
}

/// Runs `sql` with typed `params` on `client`, in one round trip (plus one to prepare, the
/// first time a connection runs a statement in `Prepared` mode).
pub(crate) async fn run(
    client: &Object,
    mode: Statements,
    sql: &str,
    params: &[(&(dyn ToSql + Sync), Type)],
) -> Result<Vec<Row>, Error> {
    match mode {
        Statements::Unnamed => client.query_typed(sql, params).await,
        Statements::Prepared => {
            let types: Vec<Type> = params.iter().map(|(_, ty)| ty.clone()).collect();
            let statement = client.prepare_typed_cached(sql, &types).await?;
            let values: Vec<&(dyn ToSql + Sync)> = params.iter().map(|(value, _)| *value).collect();
            client.query(&statement, &values).await
        }
    }
}

/// Whether `err` says the server connection does not have the prepared statement the client
/// cached (`26000`), or already has one of its name (`42P05`): what a pooler that moves a
/// client between server connections produces. The connection is then of no further use.
pub(crate) fn lost_prepared(mode: Statements, err: &Error) -> bool {
    mode == Statements::Prepared
        && matches!(
            err.code(),
            Some(code) if *code == SqlState::INVALID_SQL_STATEMENT_NAME
                || *code == SqlState::DUPLICATE_PSTATEMENT
        )
}

/// Maps a failed statement: a lost prepared statement becomes [`PreparedStatementsUnsupported`],
/// anything else as [`from_pg`] maps it.
pub(crate) fn from_statement(mode: Statements, err: Error, op: Op) -> LockError {
    if lost_prepared(mode, &err) {
        return LockError::Backend {
            backend: BACKEND,
            op,
            retryable: false,
            source: Box::new(PreparedStatementsUnsupported { source: err }),
        };
    }
    from_pg(err, op)
}

/// A prepared statement of the lock was missing on the server connection (or its name was
/// taken): a connection pooler in between (PgBouncer before 1.21 in transaction mode, or any
/// pooler without protocol-level prepared statements) ran it on another server connection.
/// The source of a non-retryable [`LockError::Backend`]; its message names the way out,
/// [`PostgresLockBuilder::prepared_statements(false)`](crate::PostgresLockBuilder::prepared_statements).
#[derive(Debug)]
pub struct PreparedStatementsUnsupported {
    source: Error,
}

impl fmt::Display for PreparedStatementsUnsupported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "a prepared statement of the lock is not on the server connection ({}): a \
             connection pooler in between does not keep prepared statements (PgBouncer before \
             1.21 in transaction mode?); build the lock with \
             `PostgresLockBuilder::prepared_statements(false)`",
            crate::error::describe(&self.source)
        )
    }
}

impl std::error::Error for PreparedStatementsUnsupported {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}
