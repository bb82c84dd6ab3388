//! The multi-lock: several mutexes at once, all or none, in one call of
//! `distlock_multi_acquire` (one round trip, where one name after the other takes one per
//! name). Each name is then an ordinary mutex lease: extended, released and announced as one.

use std::sync::Arc;
use std::time::Duration;

use lock_core::backend::MultiAttempt;
use lock_core::{Lease, LockError, Op, Token, valid_until};
use tokio::time::Instant;
use tokio_postgres::Row;
use tokio_postgres::types::Type;

use super::{first_is_true, one_row};
use crate::error::unexpected;
use crate::executor::{Executor, millis};
use crate::grant::{GrantStatement, param};
use crate::sql::CHANNEL;

/// `distlock_multi_acquire(names, token, ttl_ms)`.
const MULTI_ACQUIRE: &str = "SELECT granted, busy_index, wait_ms, fencing_tokens \
                             FROM distlock_multi_acquire($1, $2, $3)";

/// Release the names `$1` held by `$2`, each only if its lease has not ended, announcing each
/// on `$3`: what a multi-lock whose caller is gone gives back.
const MULTI_RELEASE: &str = "\
WITH released AS (
    UPDATE distlock_leases SET token = NULL, expires_at = clock_timestamp()
    WHERE name = ANY ($1) AND token = $2 AND expires_at > clock_timestamp()
    RETURNING name
)
SELECT pg_notify($3, released.name)::text FROM released";

/// One attempt at every one of `names` (distinct mutexes) with `token`, all or none.
pub(crate) async fn try_all_at_once(
    exec: &Executor,
    names: &[Arc<str>],
    token: Token,
    ttl_ms: u64,
) -> Result<MultiAttempt, LockError> {
    let grant = statement(names, token, ttl_ms);
    let started = Instant::now();
    let rows = exec.grant(grant).await?;
    let (granted, busy_index, wait_ms, fences) = one_row(&rows, "a multi-lock acquire", read)?;
    if !granted {
        return busy(names, busy_index, wait_ms);
    }
    let fences = fences.unwrap_or_default();
    if fences.len() != names.len() {
        return Err(unexpected(
            Op::Acquire,
            format!("{} fencing tokens for {} names", fences.len(), names.len()),
        ));
    }
    let valid = valid_until(started, Duration::from_millis(ttl_ms));
    Ok(MultiAttempt::Acquired(
        names
            .iter()
            .zip(fences)
            .map(|(name, fence)| {
                Lease::new(
                    Arc::clone(name),
                    token,
                    u64::try_from(fence).unwrap_or(0),
                    valid,
                )
            })
            .collect(),
    ))
}

/// The call of `distlock_multi_acquire` for `names`, with the release of every name it grants
/// as its undo.
fn statement(names: &[Arc<str>], token: Token, ttl_ms: u64) -> GrantStatement {
    let owned: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    let hex = token.to_hex().as_str().to_owned();
    GrantStatement {
        op: Op::Acquire,
        sql: MULTI_ACQUIRE,
        params: vec![
            param(owned.clone(), Type::TEXT_ARRAY),
            param(hex.clone(), Type::TEXT),
            param(millis(ttl_ms), Type::INT8),
        ],
        left_behind: first_is_true,
        name: owned.join(", "),
        undo: (
            MULTI_RELEASE,
            vec![
                param(owned, Type::TEXT_ARRAY),
                param(hex, Type::TEXT),
                param(CHANNEL, Type::TEXT),
            ],
        ),
    }
}

/// The row of `distlock_multi_acquire`: granted, the busy name's index (from 1), the wait in
/// ms, and the fencing tokens of a grant.
type Answer = (bool, i32, i64, Option<Vec<i64>>);

fn read(row: &Row) -> Result<Answer, tokio_postgres::Error> {
    Ok((
        row.try_get(0)?,
        row.try_get(1)?,
        row.try_get(2)?,
        row.try_get(3)?,
    ))
}

/// Busy at the name `busy_index` (counted from 1) of `names`, for `wait_ms`.
fn busy(names: &[Arc<str>], busy_index: i32, wait_ms: i64) -> Result<MultiAttempt, LockError> {
    let index = usize::try_from(busy_index)
        .ok()
        .and_then(|i| i.checked_sub(1))
        .filter(|i| *i < names.len())
        .ok_or_else(|| unexpected(Op::Acquire, format!("busy index {busy_index}")))?;
    Ok(MultiAttempt::Busy {
        index,
        holder_ttl: Some(Duration::from_millis(
            u64::try_from(wait_ms).unwrap_or_default(),
        )),
        announces: true,
    })
}
