//! A release by token from outside the holder (`distlock release --token`): the table the
//! token holds the name in tells the kind, then the kind's own release runs, as the holder's
//! would (a fair lock's release also withdraws it from the queue).

use futures::FutureExt;
use lock_core::{Kind, Lease, LockError, Op, Token};
use sqlx::Row;
use tokio::time::Instant;

use crate::error::unexpected;
use crate::executor::Executor;
use crate::kinds;
use crate::sql::now_us;

/// Where `?3` holds `?1` now (`?2` the name again, and so on: name and token per part): the
/// table it is in, and whether a fair queue waits on the name.
const HOLDER: &str = concat!(
    "SELECT 'lease', EXISTS (SELECT 1 FROM distlock_fair_queue q WHERE q.name = ? AND q.lapses_at > ",
    now_us!(),
    ")\n    FROM distlock_leases WHERE name = ? AND token = ? AND expires_at > ",
    now_us!(),
    "\nUNION ALL SELECT 'writer', 0 FROM distlock_rw WHERE name = ? AND writer = ? AND expires_at > ",
    now_us!(),
    "\nUNION ALL SELECT 'reader', 0 FROM distlock_rw_readers WHERE name = ? AND token = ? AND expires_at > ",
    now_us!(),
    "\nUNION ALL SELECT 'permits', 0 FROM distlock_permits WHERE name = ? AND token = ? AND expires_at > ",
    now_us!()
);

/// Releases `name` if `token` holds it (of whichever kind), waking nobody (MySQL announces no
/// releases: waiters poll); `false` when it holds nothing there.
pub(super) async fn release(exec: &Executor, name: &str, token: &str) -> Result<bool, LockError> {
    let (owned_name, owned_token) = (name.to_owned(), token.to_owned());
    let found = exec
        .run(
            Op::Release,
            Box::new(move |c| {
                async move {
                    let (name, token) = (owned_name.as_str(), owned_token.as_str());
                    let row = sqlx::query(HOLDER)
                        .bind(name)
                        .bind(name)
                        .bind(token)
                        .bind(name)
                        .bind(token)
                        .bind(name)
                        .bind(token)
                        .bind(name)
                        .bind(token)
                        .fetch_optional(c)
                        .await?;
                    row.map(|row| -> Result<(String, i64), sqlx::Error> {
                        Ok((row.try_get(0)?, row.try_get(1)?))
                    })
                    .transpose()
                }
                .boxed()
            }),
        )
        .await?;
    let Some((table, queued)) = found else {
        return Ok(false);
    };
    let parsed: Token = token.parse().map_err(|_| {
        unexpected(
            Op::Release,
            format!("{name:?} is held with {token:?}, which is not a distlock token"),
        )
    })?;
    // The preferences and counts do not change a release: only the kind's table does.
    let kind = match table.as_str() {
        "lease" if queued > 0 => Kind::Fair { queued: true },
        "writer" => Kind::Write {
            writer_preference: true,
        },
        "reader" => Kind::Read {
            writer_preference: true,
        },
        "permits" => Kind::Semaphore { permits: 1, max: 1 },
        _ => Kind::Mutex,
    };
    let lease = Lease::new(name, parsed, 0, Instant::now()).with_kind(kind);
    kinds::release(exec, &lease).await
}
