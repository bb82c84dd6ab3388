//! The read-write lock: the writer and the last write's fencing token in `distlock_rw` (one row
//! per name, the anchor every decision locks), a row per reader in `distlock_rw_readers` and a
//! record per waiting writer in `distlock_rw_waiting`.

use futures::FutureExt;
use lock_core::backend::Attempt;
use lock_core::{Kind, Lease, LockError, Op, Token};
use sqlx::{Connection, MySqlConnection, Row};

use super::{Outcome, affects_row, attempt, lock_anchor, ms_until, next_fence, owned, plus_ms};
use crate::executor::Executor;
use crate::sql::now_us;

const ANCHOR: &str = concat!(
    "SELECT writer, fencing_token, expires_at, ",
    now_us!(),
    " FROM distlock_rw WHERE name = ? FOR UPDATE"
);
const NEW_ANCHOR: &str = "INSERT INTO distlock_rw (name, writer, fencing_token, expires_at) \
                          VALUES (?, NULL, 0, 0) ON DUPLICATE KEY UPDATE name = name";
const WAITING_WRITER: &str =
    "SELECT MIN(lapses_at) FROM distlock_rw_waiting WHERE name = ? AND lapses_at > ?";
const LAST_READER: &str =
    "SELECT MAX(expires_at) FROM distlock_rw_readers WHERE name = ? AND expires_at > ?";
/// A reader's row, its grant's time (`?4`, now) kept when the token renews a live share.
const ADD_READER: &str = "INSERT INTO distlock_rw_readers (name, token, expires_at, granted_at) \
                          VALUES (?, ?, ?, ?) ON DUPLICATE KEY UPDATE \
                          granted_at = IF(expires_at > VALUES(granted_at), granted_at, \
                          VALUES(granted_at)), expires_at = VALUES(expires_at)";
const ADD_WAITING: &str = "INSERT INTO distlock_rw_waiting (name, token, lapses_at) VALUES (?, ?, ?) \
                           ON DUPLICATE KEY UPDATE lapses_at = VALUES(lapses_at)";
const DROP_WAITING: &str = "DELETE FROM distlock_rw_waiting WHERE name = ? AND token = ?";
const PRUNE_READERS: &str = "DELETE FROM distlock_rw_readers WHERE name = ? AND expires_at <= ?";
const TAKE_WRITE: &str = "UPDATE distlock_rw SET writer = ?, expires_at = ?, fencing_token = ?, \
                          granted_at = ? WHERE name = ?";
const RELEASE_READER: &str = concat!(
    "DELETE FROM distlock_rw_readers WHERE name = ? AND token = ? AND expires_at > ",
    now_us!()
);
const RELEASE_WRITER: &str = concat!(
    "UPDATE distlock_rw SET writer = NULL, expires_at = ",
    now_us!(),
    " WHERE name = ? AND writer = ? AND expires_at > ",
    now_us!()
);

/// One attempt at a reader's share ([`Kind::Read`]) or the writer's lock of `name`: one
/// transaction on the name's anchor row.
pub(crate) async fn try_acquire(
    exec: &Executor,
    name: &str,
    kind: Kind,
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
                        let mut tx = c.begin().await?;
                        let outcome = match kind {
                            Kind::Read { writer_preference } => {
                                read(&mut tx, &owned_name, &hex, ttl_ms, writer_preference).await?
                            }
                            Kind::Write { writer_preference } => {
                                write(&mut tx, &owned_name, &hex, ttl_ms, writer_preference).await?
                            }
                            _ => Outcome::Busy(0),
                        };
                        tx.commit().await?;
                        Ok(outcome)
                    }
                    .boxed()
                }),
            )
            .await
    }
    .boxed();
    attempt(exec, name, kind, token, ttl_ms, work).await
}

/// A reader's share: granted while no writer holds the name (and, with `preference`, none
/// waits); the lease's fencing token is the last write's.
async fn read(
    tx: &mut MySqlConnection,
    name: &str,
    hex: &str,
    ttl_ms: u64,
    preference: bool,
) -> Result<Outcome, sqlx::Error> {
    let row = lock_anchor(tx, ANCHOR, NEW_ANCHOR, name).await?;
    let (writer, fence, expires, now): (Option<Vec<u8>>, i64, i64, i64) = (
        row.try_get(0)?,
        row.try_get(1)?,
        row.try_get(2)?,
        row.try_get(3)?,
    );
    if writer.is_some() && expires > now {
        return Ok(Outcome::Busy(ms_until(expires, now)));
    }
    if preference {
        let waiting: Option<i64> = sqlx::query_scalar(WAITING_WRITER)
            .bind(name)
            .bind(now)
            .fetch_one(&mut *tx)
            .await?;
        if let Some(lapses) = waiting {
            return Ok(Outcome::Busy(ms_until(lapses, now)));
        }
    }
    sqlx::query(ADD_READER)
        .bind(name)
        .bind(hex)
        .bind(plus_ms(now, ttl_ms))
        .bind(now)
        .execute(&mut *tx)
        .await?;
    Ok(Outcome::Granted(super::fence(fence)))
}

/// The writer's lock: granted while no writer and no reader holds the name, with a fresh
/// fencing token. Busy with `preference`: the writer's waiting record is added or renewed.
async fn write(
    tx: &mut MySqlConnection,
    name: &str,
    hex: &str,
    ttl_ms: u64,
    preference: bool,
) -> Result<Outcome, sqlx::Error> {
    let row = lock_anchor(tx, ANCHOR, NEW_ANCHOR, name).await?;
    let (writer, fence, expires, now): (Option<Vec<u8>>, i64, i64, i64) = (
        row.try_get(0)?,
        row.try_get(1)?,
        row.try_get(2)?,
        row.try_get(3)?,
    );
    let mut busy = (writer.is_some() && expires > now).then_some(expires);
    if busy.is_none() {
        busy = sqlx::query_scalar(LAST_READER)
            .bind(name)
            .bind(now)
            .fetch_one(&mut *tx)
            .await?;
    }
    if let Some(until) = busy {
        if preference {
            sqlx::query(ADD_WAITING)
                .bind(name)
                .bind(hex)
                .bind(plus_ms(now, ttl_ms))
                .execute(&mut *tx)
                .await?;
        }
        return Ok(Outcome::Busy(ms_until(until, now)));
    }
    sqlx::query(DROP_WAITING)
        .bind(name)
        .bind(hex)
        .execute(&mut *tx)
        .await?;
    sqlx::query(PRUNE_READERS)
        .bind(name)
        .bind(now)
        .execute(&mut *tx)
        .await?;
    let fence = next_fence(fence, now);
    sqlx::query(TAKE_WRITE)
        .bind(hex)
        .bind(plus_ms(now, ttl_ms))
        .bind(fence)
        .bind(now)
        .bind(name)
        .execute(&mut *tx)
        .await?;
    Ok(Outcome::Granted(super::fence(fence)))
}

/// Releases the reader's share or the writer's lock `lease`, and withdraws a writer's waiting
/// record (what a write request that gives up leaves).
pub(crate) async fn release(exec: &Executor, lease: &Lease) -> Result<bool, LockError> {
    let (name, hex) = owned(lease);
    if !matches!(lease.kind(), Kind::Write { .. }) {
        return affects_row(exec, Op::Release, RELEASE_READER, name, hex).await;
    }
    exec.run(
        Op::Release,
        Box::new(move |c| {
            async move {
                sqlx::query(DROP_WAITING)
                    .bind(&name)
                    .bind(&hex)
                    .execute(&mut *c)
                    .await?;
                let done = sqlx::query(RELEASE_WRITER)
                    .bind(&name)
                    .bind(&hex)
                    .execute(&mut *c)
                    .await?;
                Ok(done.rows_affected() > 0)
            }
            .boxed()
        }),
    )
    .await
}
