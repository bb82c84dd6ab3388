//! The holder's note: one row per name in `distlock_notes` (schema version 3), written by the
//! holding token beside its lease row and read with it. Only the mutex and the fair lock have a
//! lease row to write beside.

use std::time::Duration;

use lock_core::backend::Holder;
use lock_core::{Kind, Lease, LockError, Op};
use tokio_postgres::Row;
use tokio_postgres::types::Type;

use crate::error::unexpected;
use crate::executor::Executor;

/// The holder of the mutex `$1` now: its fencing token, the milliseconds left of its lease, and
/// the note its token wrote (null when none). No row when nobody holds it.
const DESCRIBE_HOLDER: &str = "\
SELECT l.fencing_token,
    greatest(0, ceil(extract(epoch FROM l.expires_at - clock_timestamp()) * 1000))::int8,
    n.note
FROM distlock_leases l LEFT JOIN distlock_notes n ON n.name = l.name AND n.token = l.token
WHERE l.name = $1 AND l.token IS NOT NULL AND l.expires_at > clock_timestamp()";

/// Write the note `$3` beside the mutex `$1`, if token `$2` holds it: one row per name, for
/// that token. A row when written.
const ANNOTATE: &str = "\
INSERT INTO distlock_notes AS n (name, token, note)
SELECT $1, $2, $3 FROM distlock_leases l
WHERE l.name = $1 AND l.token = $2 AND l.expires_at > clock_timestamp()
ON CONFLICT (name) DO UPDATE SET token = excluded.token, note = excluded.note
RETURNING 1";

/// The holder of `name` now, with the note its token wrote: one `SELECT` of the lease row
/// joined with `distlock_notes`. `None` when nobody holds it.
pub(crate) async fn describe(exec: &Executor, name: &str) -> Result<Option<Holder>, LockError> {
    let rows = exec
        .query(Op::Acquire, DESCRIBE_HOLDER, &[(&name, Type::TEXT)])
        .await?;
    let Some(row) = rows.first() else {
        return Ok(None);
    };
    let read = |row: &Row| -> Result<(i64, i64, Option<Vec<u8>>), tokio_postgres::Error> {
        Ok((row.try_get(0)?, row.try_get(1)?, row.try_get(2)?))
    };
    let (fence, left_ms, note) = read(row).map_err(|e| unexpected(Op::Acquire, e))?;
    let ttl = Duration::from_millis(u64::try_from(left_ms).unwrap_or_default());
    let holder = Holder::new(u64::try_from(fence).unwrap_or(0), Some(ttl));
    Ok(Some(match note {
        Some(note) => holder.with_note(note),
        None => holder,
    }))
}

/// Writes `note` beside `lease`'s row, only while its token holds the name: one `INSERT …
/// SELECT … ON CONFLICT` into `distlock_notes`. `false` for a lease no longer ours, or of a kind
/// without a lease row (every kind but the mutex and the fair lock).
pub(crate) async fn annotate(
    exec: &Executor,
    lease: &Lease,
    note: &[u8],
) -> Result<bool, LockError> {
    if !matches!(lease.kind(), Kind::Mutex | Kind::Fair { .. }) {
        return Ok(false);
    }
    let hex = lease.token().to_hex();
    let rows = exec
        .query(
            Op::Extend,
            ANNOTATE,
            &[
                (&lease.name(), Type::TEXT),
                (&hex.as_str(), Type::TEXT),
                (&note, Type::BYTEA),
            ],
        )
        .await?;
    Ok(!rows.is_empty())
}
