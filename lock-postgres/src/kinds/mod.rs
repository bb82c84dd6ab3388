//! The kinds of lock on the lease table, one file each: the mutex, the read-write lock, the
//! semaphore, the fair lock, the multi-lock and the holder's note, each one statement or one
//! function call per operation (`sql/migration.sql`, schema version 5). Plain functions over
//! the [`Executor`]: nothing here needs the lock itself; `PostgresLock`'s `impl Lock` picks the
//! kind. Every acquire goes through [`Executor::grant`], so a grant whose caller is gone is
//! given back by its kind's own release. What the kinds share is here: the extend of a lease
//! row, how a release runs, and the reading of a grant function's answer. It names none of
//! the kinds' files.

pub(crate) mod fair;
pub(crate) mod multi;
pub(crate) mod mutex;
pub(crate) mod note;
pub(crate) mod read_write;
pub(crate) mod semaphore;

use std::time::Duration;

use lock_core::backend::Attempt;
use lock_core::{Kind, Lease, LockError, Op, Token, valid_until};
use tokio::time::Instant;
use tokio_postgres::Row;
use tokio_postgres::types::Type;

use crate::error::unexpected;
use crate::executor::{Executor, millis};
use crate::grant::{Params, borrowed, param};
use crate::sql::LeaseTable;

/// Extends `lease` to `ttl_ms` from now: one `UPDATE … WHERE name = $1 AND token = $2 AND
/// expires_at > clock_timestamp()` of the table its kind lives in, so only its own row moves.
/// `None` when the lease is no longer ours.
pub(crate) async fn extend(
    exec: &Executor,
    lease: &Lease,
    ttl_ms: u64,
) -> Result<Option<Instant>, LockError> {
    let started = Instant::now();
    let (hex, ms) = (lease.token().to_hex(), millis(ttl_ms));
    let rows = exec
        .query(
            Op::Extend,
            LeaseTable::of(lease.kind()).extend(),
            &[
                (&lease.name(), Type::TEXT),
                (&hex.as_str(), Type::TEXT),
                (&ms, Type::INT8),
            ],
        )
        .await?;
    Ok((!rows.is_empty()).then(|| valid_until(started, Duration::from_millis(ttl_ms))))
}

/// A statement that gives back what a grant left (a lease, or a waiter's record), with its
/// parameters: each kind's release, which is also the undo of its grants.
type Release = (&'static str, Params);

/// Runs a kind's release statement (which announces the release in the same statement);
/// `ours` tells from its rows whether the lease was ours.
async fn run_release(
    exec: &Executor,
    (sql, params): Release,
    ours: fn(&[Row]) -> bool,
) -> Result<bool, LockError> {
    let rows = exec.query(Op::Release, sql, &borrowed(&params)).await?;
    Ok(ours(&rows))
}

/// The parameters every release starts with: the lock name and the holder's token.
fn name_and_token(name: &str, hex: &str) -> Params {
    vec![
        param(name.to_owned(), Type::TEXT),
        param(hex.to_owned(), Type::TEXT),
    ]
}

/// Whether the first column of the first row is `true`: the answer of every grant function of
/// the read-write and fair locks (`granted`).
fn first_is_true(rows: &[Row]) -> bool {
    rows.first()
        .and_then(|row| row.try_get::<_, bool>(0).ok())
        .unwrap_or(false)
}

/// How to tell whether an acquire of `kind` left something behind (see
/// [`GrantStatement::left_behind`](crate::grant::GrantStatement::left_behind)): for a kind that
/// records its waiters, every answer does (a grant, or the record of a busy attempt), so a
/// caller that is gone has its record withdrawn after the statement, never before it; for the
/// others, a grant.
fn left_behind(kind: Kind) -> fn(&[Row]) -> bool {
    if kind.records_waiter() {
        |_| true
    } else {
        first_is_true
    }
}

/// The attempt a grant function's row `(granted, fencing_token, wait_ms)` says: a lease of
/// `kind` valid until `valid`, or busy for `wait_ms` (every holder on this schema is a distlock
/// holder, whose release is announced).
fn attempt(
    rows: &[Row],
    name: &str,
    kind: Kind,
    token: Token,
    valid: Instant,
) -> Result<Attempt, LockError> {
    let (granted, fencing_token, wait_ms) = one_row(
        rows,
        &format!("a {kind} acquire"),
        |row| -> Result<(bool, Option<i64>, i64), _> {
            Ok((row.try_get(0)?, row.try_get(1)?, row.try_get(2)?))
        },
    )?;
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

/// The one row a grant function answers, read by `read`; anything else (no row, several, a
/// column of another type) is [`LockError::Backend`] through `unexpected`, naming `what` was
/// asked ("a semaphore acquire").
fn one_row<T>(
    rows: &[Row],
    what: &str,
    read: impl FnOnce(&Row) -> Result<T, tokio_postgres::Error>,
) -> Result<T, LockError> {
    let [row] = rows else {
        return Err(unexpected(
            Op::Acquire,
            format!("{} rows from {what}", rows.len()),
        ));
    };
    read(row).map_err(|e| unexpected(Op::Acquire, e))
}

/// Busy, the blocker gone in `wait_ms` at the latest (unless renewed).
fn busy(wait_ms: i64) -> Attempt {
    Attempt::Busy {
        holder_ttl: Some(Duration::from_millis(
            u64::try_from(wait_ms).unwrap_or_default(),
        )),
        announces: true,
    }
}
