//! The holder's note: one row per name in `distlock_notes`, written by the holding token beside
//! its lease row and read with it. Only the mutex and the fair lock have a lease row.

use std::time::Duration;

use futures::FutureExt;
use lock_core::backend::Holder;
use lock_core::{Kind, Lease, LockError, Op};
use sqlx::Row;

use super::owned;
use crate::executor::Executor;
use crate::sql::now_us;

/// The holder of the mutex `?` now: its fencing token, the ms left of its lease, and the note
/// its token wrote (null when none). No row when nobody holds it.
const DESCRIBE_HOLDER: &str = concat!(
    "SELECT l.fencing_token, CAST(GREATEST(0, CEIL((l.expires_at - ",
    now_us!(),
    ") / 1000)) AS SIGNED), n.note\n",
    "FROM distlock_leases l LEFT JOIN distlock_notes n ON n.name = l.name AND n.token = l.token\n",
    "WHERE l.name = ? AND l.token IS NOT NULL AND l.expires_at > ",
    now_us!()
);

/// Write the note beside the mutex, if the token holds it: one row per name, for that token.
/// A row affected when written (found rows: an unchanged note counts).
const ANNOTATE: &str = concat!(
    "INSERT INTO distlock_notes (name, token, note)\n",
    "SELECT l.name, l.token, ? FROM distlock_leases l\n",
    "WHERE l.name = ? AND l.token = ? AND l.expires_at > ",
    now_us!(),
    "\nON DUPLICATE KEY UPDATE token = VALUES(token), note = VALUES(note)"
);

/// The holder of `name` now, with the note its token wrote. `None` when nobody holds it.
pub(crate) async fn describe(exec: &Executor, name: &str) -> Result<Option<Holder>, LockError> {
    let name = name.to_owned();
    let row = exec
        .run(
            Op::Acquire,
            Box::new(move |c| {
                async move {
                    let row = sqlx::query(DESCRIBE_HOLDER)
                        .bind(&name)
                        .fetch_optional(c)
                        .await?;
                    row.map(|row| -> Result<(i64, i64, Option<Vec<u8>>), sqlx::Error> {
                        Ok((row.try_get(0)?, row.try_get(1)?, row.try_get(2)?))
                    })
                    .transpose()
                }
                .boxed()
            }),
        )
        .await?;
    Ok(row.map(|(fence, left_ms, note)| {
        let ttl = Duration::from_millis(u64::try_from(left_ms).unwrap_or_default());
        let holder = Holder::new(super::fence(fence), Some(ttl));
        match note {
            Some(note) => holder.with_note(note),
            None => holder,
        }
    }))
}

/// Writes `note` beside `lease`'s row, only while its token holds the name. `false` for a lease
/// no longer ours, or of a kind without a lease row (every kind but the mutex and the fair lock).
pub(crate) async fn annotate(
    exec: &Executor,
    lease: &Lease,
    note: &[u8],
) -> Result<bool, LockError> {
    if !matches!(lease.kind(), Kind::Mutex | Kind::Fair { .. }) {
        return Ok(false);
    }
    let (name, hex) = owned(lease);
    let note = note.to_vec();
    exec.run(
        Op::Extend,
        Box::new(move |c| {
            async move {
                let done = sqlx::query(ANNOTATE)
                    .bind(&note)
                    .bind(&name)
                    .bind(&hex)
                    .execute(c)
                    .await?;
                Ok(done.rows_affected() > 0)
            }
            .boxed()
        }),
    )
    .await
}
