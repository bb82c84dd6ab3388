//! The mutex: one row per name in `distlock_leases`, holding the token, the expiry and the
//! fencing counter, which stays in the row after release and expiry. Its statements are in
//! `sql.rs` (`ACQUIRE`, `ACQUIRED`, `RELEASE`, `HAND_OVER`), where the load tool reads them.

use std::time::Duration;

use futures::FutureExt;
use lock_core::backend::{Attempt, Handover};
use lock_core::{Kind, Lease, LockError, Op, Token, valid_until};
use sqlx::{MySqlConnection, Row};
use tokio::time::Instant;

use super::{Outcome, affects_row, attempt, owned};
use crate::executor::{Executor, millis};
use crate::sql::{ACQUIRE, ACQUIRED, HAND_OVER, RELEASE};

/// One attempt at the mutex `name` for `ttl_ms`: the `INSERT … ON DUPLICATE KEY UPDATE` that
/// takes a row that is free, released or expired and answers a grant's fencing token in its OK
/// packet (one round trip); a busy answer reads the row for the holder's time left.
pub(crate) async fn try_acquire(
    exec: &Executor,
    name: &str,
    token: Token,
    ttl_ms: u64,
) -> Result<Attempt, LockError> {
    let (owned_name, hex) = (name.to_owned(), token.to_hex().as_str().to_owned());
    let runner = exec.clone();
    let work = async move {
        runner
            .run(
                Op::Acquire,
                Box::new(move |c| {
                    async move {
                        let done = sqlx::query(ACQUIRE)
                            .bind(&owned_name)
                            .bind(&hex)
                            .bind(millis(ttl_ms))
                            .execute(&mut *c)
                            .await?;
                        match done.last_insert_id() {
                            0 => read_grant(c, &owned_name, &hex).await,
                            fence => Ok(Outcome::Granted(fence)),
                        }
                    }
                    .boxed()
                }),
            )
            .await
    }
    .boxed();
    attempt(exec, name, Kind::Mutex, token, ttl_ms, work).await
}

/// Reads the row of `name` after a grant statement: granted to `hex` (with its fencing token)
/// when the token is ours and time is left, else busy for the holder's time left.
async fn read_grant(
    c: &mut MySqlConnection,
    name: &str,
    hex: &str,
) -> Result<Outcome, sqlx::Error> {
    let row = sqlx::query(ACQUIRED).bind(name).fetch_one(c).await?;
    let holder: Option<Vec<u8>> = row.try_get(0)?;
    let fencing_token: i64 = row.try_get(1)?;
    let left_ms: i64 = row.try_get(2)?;
    Ok(
        if holder.as_deref() == Some(hex.as_bytes()) && left_ms > 0 {
            Outcome::Granted(super::fence(fencing_token))
        } else {
            Outcome::Busy(left_ms)
        },
    )
}

/// Passes the mutex `lease` holds to `to` for `ttl_ms`: one `UPDATE` (fencing token, token,
/// expiry) if the lease is still ours, the new fencing token in its OK packet.
pub(crate) async fn hand_over(
    exec: &Executor,
    lease: &Lease,
    to: Token,
    ttl_ms: u64,
) -> Result<Handover, LockError> {
    let (name, from) = owned(lease);
    let to_hex = to.to_hex().as_str().to_owned();
    let runner = exec.clone();
    let started = Instant::now();
    let work = async move {
        runner
            .run(
                Op::Acquire,
                Box::new(move |c| {
                    async move {
                        let done = sqlx::query(HAND_OVER)
                            .bind(&to_hex)
                            .bind(millis(ttl_ms))
                            .bind(&name)
                            .bind(&from)
                            .execute(&mut *c)
                            .await?;
                        Ok((done.rows_affected() > 0)
                            .then(|| Outcome::Granted(done.last_insert_id())))
                    }
                    .boxed()
                }),
            )
            .await
    }
    .boxed();
    let name = lease.name().to_owned();
    let handed = exec
        .grant(
            work,
            |answer| matches!(answer, Some(Outcome::Granted(_))),
            move |exec| {
                async move {
                    let lease = Lease::new(name, to, 0, Instant::now());
                    let _ = release(&exec, &lease).await;
                }
                .boxed()
            },
        )
        .await?;
    Ok(match handed {
        Some(Outcome::Granted(fence)) => {
            let valid = valid_until(started, Duration::from_millis(ttl_ms));
            Handover::Handed(Lease::new(lease.name(), to, fence, valid))
        }
        _ => Handover::NotOwned,
    })
}

/// Releases the mutex `lease`: one `UPDATE`, a row affected when the lease was ours.
pub(crate) async fn release(exec: &Executor, lease: &Lease) -> Result<bool, LockError> {
    let (name, hex) = owned(lease);
    affects_row(exec, Op::Release, RELEASE, name, hex).await
}
