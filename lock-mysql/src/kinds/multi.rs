//! The multi-lock: several mutexes at once, all or none, in one transaction that locks their
//! rows in one global order (sorted by name), so overlapping multi-locks never wait for each
//! other in a cycle. Each name is then an ordinary mutex lease.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use lock_core::backend::MultiAttempt;
use lock_core::{Lease, LockError, Op, Token, valid_until};
use sqlx::{Connection, MySqlConnection, Row};
use tokio::time::Instant;

use super::{ms_until, next_fence, plus_ms};
use crate::executor::Executor;
use crate::sql::now_us;

/// What the transaction decided: the fencing tokens in the order of the names, or the index
/// of the first busy name and its wait.
enum Decision {
    Granted(Vec<i64>),
    Busy(usize, i64),
}

/// One attempt at every one of `names` (distinct mutexes) with `token`, all or none.
pub(crate) async fn try_all_at_once(
    exec: &Executor,
    names: &[Arc<str>],
    token: Token,
    ttl_ms: u64,
) -> Result<MultiAttempt, LockError> {
    let owned: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    let hex = token.to_hex().as_str().to_owned();
    let runner = exec.clone();
    let started = Instant::now();
    let work = async move {
        runner
            .run(
                Op::Acquire,
                Box::new(move |c| {
                    async move {
                        let mut tx = c.begin().await?;
                        let decided = decide(&mut tx, &owned, &hex, ttl_ms).await?;
                        tx.commit().await?;
                        Ok(decided)
                    }
                    .boxed()
                }),
            )
            .await
    }
    .boxed();
    let given_back: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    let decided = exec
        .grant(
            work,
            |decided| matches!(decided, Decision::Granted(_)),
            move |exec| {
                async move {
                    for name in given_back {
                        let lease = Lease::new(name, token, 0, Instant::now());
                        let _ = super::mutex::release(&exec, &lease).await;
                    }
                }
                .boxed()
            },
        )
        .await?;
    match decided {
        Decision::Busy(index, wait_ms) => Ok(MultiAttempt::Busy {
            index,
            holder_ttl: Some(Duration::from_millis(
                u64::try_from(wait_ms).unwrap_or_default(),
            )),
            announces: false,
        }),
        Decision::Granted(fences) => {
            let valid = valid_until(started, Duration::from_millis(ttl_ms));
            Ok(MultiAttempt::Acquired(
                names
                    .iter()
                    .zip(fences)
                    .map(|(name, fence)| {
                        Lease::new(Arc::clone(name), token, super::fence(fence), valid)
                    })
                    .collect(),
            ))
        }
    }
}

/// `?, ?, …` for `n` parameters.
fn placeholders(n: usize) -> String {
    vec!["?"; n].join(", ")
}

async fn decide(
    tx: &mut MySqlConnection,
    names: &[String],
    hex: &str,
    ttl_ms: u64,
) -> Result<Decision, sqlx::Error> {
    let mut sorted: Vec<&String> = names.iter().collect();
    sorted.sort();
    let select = format!(
        "SELECT name, token, fencing_token, expires_at, {} FROM distlock_leases \
         WHERE name IN ({}) ORDER BY name FOR UPDATE",
        now_us!(),
        placeholders(names.len())
    );
    let mut rows = lock_rows(tx, &select, &sorted).await?;
    if rows.len() < names.len() {
        let insert = format!(
            "INSERT INTO distlock_leases (name, token, fencing_token, expires_at) VALUES {} \
             ON DUPLICATE KEY UPDATE name = name",
            vec!["(?, NULL, 0, 0)"; names.len()].join(", ")
        );
        let mut query = sqlx::query(&insert);
        for name in &sorted {
            query = query.bind(*name);
        }
        query.execute(&mut *tx).await?;
        rows = lock_rows(tx, &select, &sorted).await?;
    }
    let now = rows.values().map(|r| r.3).max().unwrap_or_default();
    let mut fences = Vec::with_capacity(names.len());
    for (index, name) in names.iter().enumerate() {
        let Some((holder, fence, expires, _)) = rows.get(name.as_bytes()) else {
            return Err(sqlx::Error::RowNotFound);
        };
        if holder.is_some() && *expires > now {
            return Ok(Decision::Busy(index, ms_until(*expires, now)));
        }
        fences.push(next_fence(*fence, now));
    }
    for (name, fence) in names.iter().zip(&fences) {
        sqlx::query(
            "UPDATE distlock_leases SET token = ?, expires_at = ?, fencing_token = ?, \
             granted_at = ? WHERE name = ?",
        )
        .bind(hex)
        .bind(plus_ms(now, ttl_ms))
        .bind(fence)
        .bind(now)
        .bind(name)
        .execute(&mut *tx)
        .await?;
    }
    Ok(Decision::Granted(fences))
}

/// A locked row: its token, fencing token, expiry, and the server's clock.
type Locked = (Option<Vec<u8>>, i64, i64, i64);

/// Locks the rows of `sorted` (in that order) and reads them, by name.
async fn lock_rows(
    tx: &mut MySqlConnection,
    select: &str,
    sorted: &[&String],
) -> Result<HashMap<Vec<u8>, Locked>, sqlx::Error> {
    let mut query = sqlx::query(select);
    for name in sorted {
        query = query.bind(*name);
    }
    let rows = query.fetch_all(&mut *tx).await?;
    rows.iter()
        .map(|row| {
            Ok((
                row.try_get::<Vec<u8>, _>(0)?,
                (
                    row.try_get(1)?,
                    row.try_get(2)?,
                    row.try_get(3)?,
                    row.try_get(4)?,
                ),
            ))
        })
        .collect()
}
