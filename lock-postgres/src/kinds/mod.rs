//! The kinds beyond the mutex, each one function call per operation on the schema's version 2
//! (`sql/migration.sql`): the read-write lock, the semaphore and the fair lock. Every acquire
//! goes through [`Executor::grant`](crate::executor::Executor::grant), so a grant whose caller
//! is gone is given back by its kind's own release. Plain functions over the executor: nothing
//! here needs the lock itself.

mod fair;
mod multi;
mod read_write;
mod semaphore;

use std::time::Duration;

use lock_core::backend::Attempt;
use lock_core::{Kind, Lease, LockError, Op, Token};
use tokio::time::Instant;
use tokio_postgres::Row;

use crate::error::unexpected;
use crate::grant::{Params, param};
use crate::sql::{CHANNEL, RELEASE, TURN_CHANNEL};
use tokio_postgres::types::Type;

/// The statement that releases the lease `hex` of `name` held as `kind` (or withdraws its
/// waiter's record), with its parameters; [`released`] reads its answer.
pub(crate) fn release_statement(name: &str, hex: &str, kind: Kind) -> (&'static str, Params) {
    let (name, hex) = (
        param(name.to_owned(), Type::TEXT),
        param(hex.to_owned(), Type::TEXT),
    );
    let channel = param(CHANNEL, Type::TEXT);
    match kind {
        Kind::Read { .. } => (
            read_write::RW_RELEASE,
            vec![name, hex, param(false, Type::BOOL), channel],
        ),
        Kind::Write { .. } => (
            read_write::RW_RELEASE,
            vec![name, hex, param(true, Type::BOOL), channel],
        ),
        Kind::Semaphore { .. } => (semaphore::SEMAPHORE_RELEASE, vec![name, hex, channel]),
        Kind::Fair { .. } => (
            fair::FAIR_RELEASE,
            vec![name, hex, channel, param(TURN_CHANNEL, Type::TEXT)],
        ),
        _ => (RELEASE, vec![name, hex, channel]),
    }
}

/// Whether the rows of [`release_statement`] for `kind` say the lease was ours: a row for the
/// mutex and the semaphore (plain statements), `true` from the functions of the others.
pub(crate) fn released(kind: Kind, rows: &[Row]) -> bool {
    match kind {
        Kind::Read { .. } | Kind::Write { .. } | Kind::Fair { .. } => first_is_true(rows),
        _ => !rows.is_empty(),
    }
}

pub(crate) use fair::try_fair;
pub(crate) use multi::try_all_at_once;
pub(crate) use read_write::try_read_write;
pub(crate) use semaphore::{IN_USE, try_semaphore};

/// Whether the first column of the first row is `true`: the answer of every grant function of
/// the read-write and fair locks (`granted`).
pub(crate) fn first_is_true(rows: &[Row]) -> bool {
    rows.first()
        .and_then(|row| row.try_get::<_, bool>(0).ok())
        .unwrap_or(false)
}

/// How to tell whether an acquire of `kind` left something behind (see
/// [`GrantStatement::left_behind`](crate::grant::GrantStatement::left_behind)): for a kind that
/// records its waiters, every answer does (a grant, or the record of a busy attempt), so a
/// caller that is gone has its record withdrawn after the statement, never before it; for the
/// others, a grant.
pub(crate) fn left_behind(kind: Kind) -> fn(&[Row]) -> bool {
    if kind.records_waiter() {
        |_| true
    } else {
        first_is_true
    }
}

/// The attempt a grant function's row `(granted, fencing_token, wait_ms)` says: a lease of
/// `kind` valid until `valid`, or busy for `wait_ms` (every holder on this schema is a distlock
/// holder, whose release is announced).
pub(crate) fn attempt(
    rows: &[Row],
    name: &str,
    kind: Kind,
    token: Token,
    valid: Instant,
) -> Result<Attempt, LockError> {
    let [row] = rows else {
        return Err(unexpected(
            Op::Acquire,
            format!("{} rows from a {kind} acquire", rows.len()),
        ));
    };
    let read = |row: &Row| -> Result<(bool, Option<i64>, i64), tokio_postgres::Error> {
        Ok((row.try_get(0)?, row.try_get(1)?, row.try_get(2)?))
    };
    let (granted, fencing_token, wait_ms) = read(row).map_err(|e| unexpected(Op::Acquire, e))?;
    if granted {
        let fencing_token = fencing_token
            .and_then(|t| u64::try_from(t).ok())
            .unwrap_or(0);
        Ok(Attempt::Acquired(
            Lease::new(name, token, fencing_token, valid).with_kind(kind),
        ))
    } else {
        Ok(busy(wait_ms))
    }
}

/// Busy, the blocker gone in `wait_ms` at the latest (unless renewed).
pub(crate) fn busy(wait_ms: i64) -> Attempt {
    Attempt::Busy {
        holder_ttl: Some(Duration::from_millis(
            u64::try_from(wait_ms).unwrap_or_default(),
        )),
        announces: true,
    }
}
