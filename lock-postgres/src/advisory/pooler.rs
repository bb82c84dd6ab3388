//! The error of a lease whose statements reached another server session: a pooler in
//! transaction mode in between.

use std::fmt;

use lock_core::{LockError, Op};

use crate::error::BACKEND;

/// The source of the [`LockError::Backend`] (not retryable) that a [`PostgresAdvisoryLock`]
/// returns when a held lease's statements ran on another server session than its acquire: a
/// connection pooler in transaction mode (PgBouncer `pool_mode = transaction`) sits between
/// the lock and PostgreSQL. Session advisory locks cannot work there; the lease is dropped.
/// Point the advisory mode at PostgreSQL directly or at a session-mode pool.
///
/// [`PostgresAdvisoryLock`]: crate::PostgresAdvisoryLock
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionPooler {
    /// The server process (`pg_backend_pid()`) that took the lock.
    pub acquired_on: i32,
    /// The server process the later statement ran on.
    pub now_on: i32,
}

impl fmt::Display for TransactionPooler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the advisory lock was taken by server process {} but its connection now runs on \
             process {}: a pooler in transaction mode is in between, where session advisory \
             locks do not work; connect the advisory mode to PostgreSQL directly or through a \
             session-mode pool",
            self.acquired_on, self.now_on
        )
    }
}

impl std::error::Error for TransactionPooler {}

/// The error of a lease whose statement ran on server process `now_on`, not `acquired_on`.
pub(super) fn pooler(acquired_on: i32, now_on: i32) -> LockError {
    LockError::Backend {
        backend: BACKEND,
        op: Op::Extend,
        retryable: false,
        source: Box::new(TransactionPooler {
            acquired_on,
            now_on,
        }),
    }
}
