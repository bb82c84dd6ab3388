//! The fair lock: the mutex of the same name (its row in `distlock_leases`, the anchor),
//! granted only to the head of the name's queue in `distlock_fair_queue` (arrival order).
//! Releases are not announced: waiters poll, and only the head can be granted.

use std::time::Duration;

use futures::FutureExt;
use lock_core::backend::Attempt;
use lock_core::{Kind, Lease, LockError, Op, Token, fair_entry_ttl};
use sqlx::{Connection, MySqlConnection, Row};

use super::{Outcome, attempt, lock_anchor, ms_until, next_fence, owned, plus_ms};
use crate::executor::Executor;
use crate::sql::now_us;

pub(crate) const ANCHOR: &str = concat!(
    "SELECT token, fencing_token, expires_at, ",
    now_us!(),
    " FROM distlock_leases WHERE name = ? FOR UPDATE"
);
pub(crate) const NEW_ANCHOR: &str = "INSERT INTO distlock_leases (name, token, fencing_token, expires_at) \
     VALUES (?, NULL, 0, 0) ON DUPLICATE KEY UPDATE name = name";
const PRUNE: &str = "DELETE FROM distlock_fair_queue WHERE name = ? AND lapses_at <= ?";
const HEAD: &str =
    "SELECT token, lapses_at FROM distlock_fair_queue WHERE name = ? ORDER BY arrival LIMIT 1";
const TAKE: &str = "UPDATE distlock_leases SET token = ?, expires_at = ?, fencing_token = ?, \
                    granted_at = ? WHERE name = ?";
const LEAVE: &str = "DELETE FROM distlock_fair_queue WHERE name = ? AND token = ?";
const QUEUE: &str = "INSERT INTO distlock_fair_queue (name, token, lapses_at) VALUES (?, ?, ?) \
                     ON DUPLICATE KEY UPDATE lapses_at = VALUES(lapses_at)";
const FREE: &str = "UPDATE distlock_leases SET token = NULL, expires_at = ? WHERE name = ?";

/// One attempt at the fair lock `name`; a `queued` attempt that finds it busy takes (or keeps)
/// a place in the queue: one transaction on the mutex row of the name.
pub(crate) async fn try_acquire(
    exec: &Executor,
    name: &str,
    queued: bool,
    token: Token,
    ttl_ms: u64,
) -> Result<Attempt, LockError> {
    let entry_ms = if queued {
        u64::try_from(fair_entry_ttl(Duration::from_millis(ttl_ms)).as_millis()).unwrap_or(u64::MAX)
    } else {
        0
    };
    let (owned_name, hex) = (name.to_owned(), token.to_hex().as_str().to_owned());
    let runner = exec.clone();
    let work = async move {
        runner
            .run(
                Op::Acquire,
                Box::new(move |c| {
                    async move {
                        let mut tx = c.begin().await?;
                        let outcome = decide(&mut tx, &owned_name, &hex, ttl_ms, entry_ms).await?;
                        tx.commit().await?;
                        Ok(outcome)
                    }
                    .boxed()
                }),
            )
            .await
    }
    .boxed();
    attempt(exec, name, Kind::Fair { queued }, token, ttl_ms, work).await
}

async fn decide(
    tx: &mut MySqlConnection,
    name: &str,
    hex: &str,
    ttl_ms: u64,
    entry_ms: u64,
) -> Result<Outcome, sqlx::Error> {
    let row = lock_anchor(tx, ANCHOR, NEW_ANCHOR, name).await?;
    let (holder, fence, expires, now): (Option<Vec<u8>>, i64, i64, i64) = (
        row.try_get(0)?,
        row.try_get(1)?,
        row.try_get(2)?,
        row.try_get(3)?,
    );
    sqlx::query(PRUNE)
        .bind(name)
        .bind(now)
        .execute(&mut *tx)
        .await?;
    let head = sqlx::query(HEAD)
        .bind(name)
        .fetch_optional(&mut *tx)
        .await?;
    let head: Option<(Vec<u8>, i64)> = match head {
        Some(row) => Some((row.try_get(0)?, row.try_get(1)?)),
        None => None,
    };
    let wait = match &head {
        Some((first, lapses)) if first.as_slice() != hex.as_bytes() => ms_until(*lapses, now),
        _ if holder.is_none() || expires <= now => {
            let fence = next_fence(fence, now);
            sqlx::query(TAKE)
                .bind(hex)
                .bind(plus_ms(now, ttl_ms))
                .bind(fence)
                .bind(now)
                .bind(name)
                .execute(&mut *tx)
                .await?;
            sqlx::query(LEAVE)
                .bind(name)
                .bind(hex)
                .execute(&mut *tx)
                .await?;
            return Ok(Outcome::Granted(super::fence(fence)));
        }
        _ => ms_until(expires, now),
    };
    if entry_ms > 0 {
        sqlx::query(QUEUE)
            .bind(name)
            .bind(hex)
            .bind(plus_ms(now, entry_ms))
            .execute(&mut *tx)
            .await?;
    }
    Ok(Outcome::Busy(wait))
}

/// Releases the fair lock `lease` if it holds it, and withdraws its place in the queue: one
/// transaction on the mutex row. `true` when the lock was the lease's.
pub(crate) async fn release(exec: &Executor, lease: &Lease) -> Result<bool, LockError> {
    let (name, hex) = owned(lease);
    exec.run(
        Op::Release,
        Box::new(move |c| {
            async move {
                let mut tx = c.begin().await?;
                let row = lock_anchor(&mut tx, ANCHOR, NEW_ANCHOR, &name).await?;
                let (holder, expires, now): (Option<Vec<u8>>, i64, i64) =
                    (row.try_get(0)?, row.try_get(2)?, row.try_get(3)?);
                sqlx::query(LEAVE)
                    .bind(&name)
                    .bind(&hex)
                    .execute(&mut *tx)
                    .await?;
                let ours = holder.as_deref() == Some(hex.as_bytes()) && expires > now;
                if ours {
                    sqlx::query(FREE)
                        .bind(now)
                        .bind(&name)
                        .execute(&mut *tx)
                        .await?;
                }
                tx.commit().await?;
                Ok(ours)
            }
            .boxed()
        }),
    )
    .await
}
