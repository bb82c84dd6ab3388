//! The semaphore: its permit count in `distlock_semaphores` (one row per name, the anchor) and a
//! row per holder in `distlock_permits`, with the permits it holds and its own expiry.

use futures::FutureExt;
use lock_core::backend::Attempt;
use lock_core::{Kind, Lease, LockError, Op, Token};
use sqlx::{Connection, MySqlConnection, Row};

use super::{Outcome, affects_row, attempt, lock_anchor, ms_until, owned, plus_ms};
use crate::error::unexpected;
use crate::executor::Executor;
use crate::sql::now_us;

const ANCHOR: &str = concat!(
    "SELECT max, ",
    now_us!(),
    " FROM distlock_semaphores WHERE name = ? FOR UPDATE"
);
const NEW_ANCHOR: &str = "INSERT INTO distlock_semaphores (name, max) VALUES (?, 0) \
                          ON DUPLICATE KEY UPDATE name = name";
const PRUNE: &str = "DELETE FROM distlock_permits WHERE name = ? AND expires_at <= ?";
const OTHERS: &str = "SELECT CAST(COALESCE(SUM(permits), 0) AS SIGNED), COUNT(*), MIN(expires_at) \
                      FROM distlock_permits WHERE name = ? AND token <> ?";
const SET_MAX: &str = "UPDATE distlock_semaphores SET max = ? WHERE name = ?";
/// A holder's row, its grant's time (`?5`, now) kept when the token renews a live hold.
const ADD_HOLDER: &str = "INSERT INTO distlock_permits (name, token, permits, expires_at, \
                          granted_at) VALUES (?, ?, ?, ?, ?) ON DUPLICATE KEY UPDATE \
                          granted_at = IF(expires_at > VALUES(granted_at), granted_at, \
                          VALUES(granted_at)), \
                          permits = VALUES(permits), expires_at = VALUES(expires_at)";
const RELEASE: &str = concat!(
    "DELETE FROM distlock_permits WHERE name = ? AND token = ? AND expires_at > ",
    now_us!()
);
const IN_USE: &str = concat!(
    "SELECT CAST(COALESCE(SUM(permits), 0) AS SIGNED) FROM distlock_permits ",
    "WHERE name = ? AND expires_at > ",
    now_us!()
);

/// What the semaphore's transaction decided: the attempt's outcome, or the `max` the holders
/// use when it is not this request's.
enum Decision {
    Outcome(Outcome),
    Mismatch(i32),
}

/// One attempt at `permits` of the `max` permits of `name`, all or none: one transaction on the
/// name's anchor row. A semaphore nobody holds takes this request's `max`.
pub(crate) async fn try_acquire(
    exec: &Executor,
    name: &str,
    permits: u32,
    max: u32,
    token: Token,
    ttl_ms: u64,
) -> Result<Attempt, LockError> {
    let kind = Kind::Semaphore { permits, max };
    let (owned_name, hex) = (name.to_owned(), token.to_hex().as_str().to_owned());
    let count = |n: u32| i32::try_from(n).unwrap_or(i32::MAX);
    let (permits_i, max_i) = (count(permits), count(max));
    let runner = exec.clone();
    let mismatch = std::sync::Arc::new(std::sync::Mutex::new(None));
    let seen = std::sync::Arc::clone(&mismatch);
    let work = async move {
        let decided = runner
            .run(
                Op::Acquire,
                Box::new(move |c| {
                    async move {
                        let mut tx = c.begin().await?;
                        let decided =
                            decide(&mut tx, &owned_name, &hex, permits_i, max_i, ttl_ms).await?;
                        tx.commit().await?;
                        Ok(decided)
                    }
                    .boxed()
                }),
            )
            .await?;
        match decided {
            Decision::Outcome(outcome) => Ok(outcome),
            Decision::Mismatch(held) => {
                *seen
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(held);
                Ok(Outcome::Busy(-1))
            }
        }
    }
    .boxed();
    let answer = attempt(exec, name, kind, token, ttl_ms, work).await?;
    let held = *mismatch
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    match held {
        Some(held_max) => Err(LockError::PermitsMismatch {
            name: name.to_owned(),
            max,
            held_max: u32::try_from(held_max).unwrap_or(0),
        }),
        None => Ok(answer),
    }
}

async fn decide(
    tx: &mut MySqlConnection,
    name: &str,
    hex: &str,
    permits: i32,
    max: i32,
    ttl_ms: u64,
) -> Result<Decision, sqlx::Error> {
    let row = lock_anchor(tx, ANCHOR, NEW_ANCHOR, name).await?;
    let (mut held_max, now): (i32, i64) = (row.try_get(0)?, row.try_get(1)?);
    sqlx::query(PRUNE)
        .bind(name)
        .bind(now)
        .execute(&mut *tx)
        .await?;
    let row = sqlx::query(OTHERS)
        .bind(name)
        .bind(hex)
        .fetch_one(&mut *tx)
        .await?;
    let (used, holders, soonest): (i64, i64, Option<i64>) =
        (row.try_get(0)?, row.try_get(1)?, row.try_get(2)?);
    if holders == 0 && held_max != max {
        sqlx::query(SET_MAX)
            .bind(max)
            .bind(name)
            .execute(&mut *tx)
            .await?;
        held_max = max;
    } else if held_max != max {
        return Ok(Decision::Mismatch(held_max));
    }
    if used + i64::from(permits) > i64::from(held_max) {
        let wait = soonest.map_or(0, |until| ms_until(until, now));
        return Ok(Decision::Outcome(Outcome::Busy(wait)));
    }
    sqlx::query(ADD_HOLDER)
        .bind(name)
        .bind(hex)
        .bind(permits)
        .bind(plus_ms(now, ttl_ms))
        .bind(now)
        .execute(&mut *tx)
        .await?;
    Ok(Decision::Outcome(Outcome::Granted(0)))
}

/// The permits of the live holders of `name`: one `SELECT SUM(permits)`.
pub(crate) async fn in_use(exec: &Executor, name: &str) -> Result<u32, LockError> {
    let name = name.to_owned();
    let used: i64 = exec
        .run(
            Op::Acquire,
            Box::new(move |c| {
                async move { sqlx::query_scalar(IN_USE).bind(&name).fetch_one(c).await }.boxed()
            }),
        )
        .await?;
    u32::try_from(used).map_err(|_| unexpected(Op::Acquire, format!("{used} permits in use")))
}

/// Returns the permits of the semaphore holder `lease`: one `DELETE`, a row affected when they
/// were its own.
pub(crate) async fn release(exec: &Executor, lease: &Lease) -> Result<bool, LockError> {
    let (name, hex) = owned(lease);
    affects_row(exec, Op::Release, RELEASE, name, hex).await
}
