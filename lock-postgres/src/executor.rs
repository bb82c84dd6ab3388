//! How `PostgresLock` runs one statement: a pooled connection within the connect timeout, the
//! statement within the statement timeout, prepared or not, and the connection dropped when it
//! broke. Every kind's operations run through it, so none of them needs the lock itself.

use std::time::Duration;

use deadpool_postgres::{Object, Pool};
use lock_core::{LockError, Op, TimeoutPhase};
use tokio::time::Instant;
use tokio_postgres::Row;
use tokio_postgres::types::{ToSql, Type};

use crate::error::timeout;
use crate::grant::{GrantStatement, Limits, run_grant};
use crate::pool::{client, discard};
use crate::statements::{Statements, from_statement, lost_prepared, run};

/// The pool and the limits every statement of one `PostgresLock` runs within.
pub(crate) struct Executor {
    pub(crate) pool: Pool,
    pub(crate) connect_timeout: Duration,
    pub(crate) statement_timeout: Duration,
    pub(crate) statements: Statements,
}

impl Executor {
    /// Runs a statement that may grant a lease (or record a waiter); see [`run_grant`].
    pub(crate) async fn grant(&self, grant: GrantStatement) -> Result<Vec<Row>, LockError> {
        let limits = Limits {
            connect: self.connect_timeout,
            statement: self.statement_timeout,
            statements: self.statements,
        };
        run_grant(self.pool.clone(), limits, grant).await
    }

    /// Runs one statement (typed parameters, prepared or not: one round trip) within the
    /// statement timeout, dropping the connection when it timed out, broke, or lost its
    /// prepared statements.
    pub(crate) async fn query(
        &self,
        op: Op,
        sql: &str,
        params: &[(&(dyn ToSql + Sync), Type)],
    ) -> Result<Vec<Row>, LockError> {
        let client = client(&self.pool, self.connect_timeout).await?;
        let started = Instant::now();
        let statement = run(&client, self.statements, sql, params);
        match tokio::time::timeout(self.statement_timeout, statement).await {
            Ok(Ok(rows)) => Ok(rows),
            Ok(Err(err)) => {
                if err.is_closed() || lost_prepared(self.statements, &err) {
                    drop(Object::take(client));
                }
                Err(from_statement(self.statements, err, op))
            }
            Err(_) => {
                discard(client, self.connect_timeout);
                Err(timeout(TimeoutPhase::Command, started.elapsed()))
            }
        }
    }
}

/// A TTL in milliseconds as the `int8` parameter the statements take (`check_ttl` caps a TTL
/// at 2^53 - 1 ms, so nothing is cut).
pub(crate) fn millis(ms: u64) -> i64 {
    i64::try_from(ms).unwrap_or(i64::MAX)
}
