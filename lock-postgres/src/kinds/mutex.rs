//! The mutex: one row per name in `distlock_leases`, the lease table, holding the token, the
//! expiry and the fencing counter, which stays in the row after release and expiry. Its
//! statements are in `sql.rs` (`ACQUIRE`, `RELEASE`, `HAND_OVER`), where the load tool reads
//! them. The fair lock's lease is this row too.

use std::time::Duration;

use lock_core::backend::{Attempt, Handover};
use lock_core::{Lease, LockError, Op, Token, valid_until};
use tokio::time::Instant;
use tokio_postgres::types::Type;

use super::{Release, first_is_true, name_and_token, one_row, run_release};
use crate::error::unexpected;
use crate::executor::{Executor, millis};
use crate::grant::{GrantStatement, param};
use crate::sql::{ACQUIRE, CHANNEL, HAND_OVER, RELEASE};

/// One attempt at the mutex `name` for `ttl_ms`: one `INSERT … ON CONFLICT (name) DO UPDATE …
/// RETURNING`, which takes a row that is free, released or expired.
pub(crate) async fn try_acquire(
    exec: &Executor,
    name: &str,
    token: Token,
    ttl_ms: u64,
) -> Result<Attempt, LockError> {
    let started = Instant::now();
    let rows = exec
        .grant(GrantStatement {
            op: Op::Acquire,
            sql: ACQUIRE,
            params: vec![
                param(name.to_owned(), Type::TEXT),
                param(token.to_hex().as_str().to_owned(), Type::TEXT),
                param(millis(ttl_ms), Type::INT8),
            ],
            left_behind: first_is_true,
            name: name.to_owned(),
            undo: release_statement(name, token.to_hex().as_str()),
        })
        .await?;
    let (ours, fencing_token, left_ms) =
        one_row(&rows, "acquire", |row| -> Result<(bool, i64, i64), _> {
            Ok((row.try_get(0)?, row.try_get(1)?, row.try_get(2)?))
        })?;
    if ours {
        let fencing_token = u64::try_from(fencing_token).unwrap_or(0);
        let valid = valid_until(started, Duration::from_millis(ttl_ms));
        Ok(Attempt::Acquired(Lease::new(
            name,
            token,
            fencing_token,
            valid,
        )))
    } else {
        Ok(Attempt::Busy {
            holder_ttl: Some(Duration::from_millis(
                u64::try_from(left_ms).unwrap_or_default(),
            )),
            // Every row is a distlock holder's, and every release is announced.
            announces: true,
        })
    }
}

/// Passes the mutex `lease` holds to `to` for `ttl_ms`: one `UPDATE` (token, expiry, next
/// fencing token) if the lease is still ours.
pub(crate) async fn hand_over(
    exec: &Executor,
    lease: &Lease,
    to: Token,
    ttl_ms: u64,
) -> Result<Handover, LockError> {
    let started = Instant::now();
    let to_hex = to.to_hex().as_str().to_owned();
    let rows = exec
        .grant(GrantStatement {
            op: Op::Acquire,
            sql: HAND_OVER,
            params: vec![
                param(lease.name().to_owned(), Type::TEXT),
                param(lease.token().to_hex().as_str().to_owned(), Type::TEXT),
                param(to_hex.clone(), Type::TEXT),
                param(millis(ttl_ms), Type::INT8),
            ],
            left_behind: |rows| !rows.is_empty(),
            name: lease.name().to_owned(),
            undo: release_statement(lease.name(), &to_hex),
        })
        .await?;
    let Some(row) = rows.first() else {
        return Ok(Handover::NotOwned);
    };
    let fencing_token: i64 = row.try_get(0).map_err(|e| unexpected(Op::Acquire, e))?;
    let valid = valid_until(started, Duration::from_millis(ttl_ms));
    Ok(Handover::Handed(Lease::new(
        lease.name(),
        to,
        u64::try_from(fencing_token).unwrap_or(0),
        valid,
    )))
}

/// Releases the mutex `lease`: one `UPDATE … RETURNING`, announced on the release channel in the
/// same statement; a row when the lease was ours.
pub(crate) async fn release(exec: &Executor, lease: &Lease) -> Result<bool, LockError> {
    let statement = release_statement(lease.name(), lease.token().to_hex().as_str());
    run_release(exec, statement, |rows| !rows.is_empty()).await
}

/// The release of the mutex `name` held by `hex` (`sql.rs`'s `RELEASE`).
fn release_statement(name: &str, hex: &str) -> Release {
    let mut params = name_and_token(name, hex);
    params.push(param(CHANNEL, Type::TEXT));
    (RELEASE, params)
}
