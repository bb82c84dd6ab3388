//! The semaphore: its permit count in `distlock_semaphores` (one row per name, the anchor) and a
//! row per holder in `distlock_permits`, with the permits it holds and its own expiry.

use std::time::Duration;

use lock_core::backend::Attempt;
use lock_core::{Kind, Lease, LockError, Op, Token, valid_until};
use tokio::time::Instant;
use tokio_postgres::Row;
use tokio_postgres::types::Type;

use super::{Release, busy, name_and_token, one_row, run_release};
use crate::error::unexpected;
use crate::executor::{Executor, millis};
use crate::grant::{GrantStatement, param};
use crate::sql::CHANNEL;

/// `distlock_semaphore_acquire(name, token, permits, max, ttl_ms)`.
const SEMAPHORE_ACQUIRE: &str =
    "SELECT status, wait_ms, held_max FROM distlock_semaphore_acquire($1, $2, $3, $4, $5)";

/// Return the permits of holder `$2` of `$1` and announce it on `$3`, pruning the name's expired
/// holders on the way. One row when the permits were the holder's (its lease had not ended).
const SEMAPHORE_RELEASE: &str = "\
WITH gone AS (
    DELETE FROM distlock_permits
    WHERE name = $1 AND (token = $2 OR expires_at <= clock_timestamp())
    RETURNING token, expires_at
)
SELECT pg_notify($3, $1)::text FROM gone WHERE token = $2 AND expires_at > clock_timestamp()";

/// The permits of `$1` held now.
const IN_USE: &str = "\
SELECT coalesce(sum(permits), 0)::int8 FROM distlock_permits
WHERE name = $1 AND expires_at > clock_timestamp()";

/// Whether the semaphore acquire's row says granted (`status` 1).
fn granted(rows: &[Row]) -> bool {
    rows.first().and_then(|row| row.try_get::<_, i32>(0).ok()) == Some(1)
}

/// One attempt at `permits` of the `max` permits of `name`, all or none: one call of
/// `distlock_semaphore_acquire`.
pub(crate) async fn try_acquire(
    exec: &Executor,
    name: &str,
    permits: u32,
    max: u32,
    token: Token,
    ttl_ms: u64,
) -> Result<Attempt, LockError> {
    let kind = Kind::Semaphore { permits, max };
    let hex = token.to_hex().as_str().to_owned();
    let count = |n: u32| i32::try_from(n).unwrap_or(i32::MAX);
    let started = Instant::now();
    let rows = exec
        .grant(GrantStatement {
            op: Op::Acquire,
            sql: SEMAPHORE_ACQUIRE,
            params: vec![
                param(name.to_owned(), Type::TEXT),
                param(hex.clone(), Type::TEXT),
                param(count(permits), Type::INT4),
                param(count(max), Type::INT4),
                param(millis(ttl_ms), Type::INT8),
            ],
            left_behind: granted,
            name: name.to_owned(),
            undo: release_statement(name, &hex),
        })
        .await?;
    let (status, wait_ms, held_max) = one_row(
        &rows,
        "a semaphore acquire",
        |row| -> Result<(i32, i64, i32), _> {
            Ok((row.try_get(0)?, row.try_get(1)?, row.try_get(2)?))
        },
    )?;
    match status {
        1 => {
            let valid = valid_until(started, Duration::from_millis(ttl_ms));
            Ok(Attempt::Acquired(
                Lease::new(name, token, 0, valid).with_kind(kind),
            ))
        }
        0 => Ok(busy(wait_ms)),
        -1 => Err(LockError::PermitsMismatch {
            name: name.to_owned(),
            max,
            held_max: u32::try_from(held_max).unwrap_or(0),
        }),
        other => Err(unexpected(
            Op::Acquire,
            format!("semaphore acquire status {other}"),
        )),
    }
}

/// The permits of the live holders of `name`: one `SELECT sum(permits)`.
pub(crate) async fn in_use(exec: &Executor, name: &str) -> Result<u32, LockError> {
    let rows = exec
        .query(Op::Acquire, IN_USE, &[(&name, Type::TEXT)])
        .await?;
    let used: i64 = rows
        .first()
        .ok_or_else(|| unexpected(Op::Acquire, "no row from the permit count"))?
        .try_get(0)
        .map_err(|e| unexpected(Op::Acquire, e))?;
    Ok(u32::try_from(used).unwrap_or(u32::MAX))
}

/// Returns the permits of the semaphore holder `lease`: one `DELETE`, announced on the release
/// channel in the same statement; a row when they were its own.
pub(crate) async fn release(exec: &Executor, lease: &Lease) -> Result<bool, LockError> {
    let statement = release_statement(lease.name(), lease.token().to_hex().as_str());
    run_release(exec, statement, |rows| !rows.is_empty()).await
}

/// The release of the permits of holder `hex` of `name`.
fn release_statement(name: &str, hex: &str) -> Release {
    let mut params = name_and_token(name, hex);
    params.push(param(CHANNEL, Type::TEXT));
    (SEMAPHORE_RELEASE, params)
}
