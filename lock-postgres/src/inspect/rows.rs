//! The lease table's rows as held locks (`HeldLock`): the kinds' queries (`table.rs`) run at
//! once, and each row read as the kind it is.

use std::time::{Duration, UNIX_EPOCH};

use lock_core::backend::{HeldKind, HeldLock, HolderView};
use lock_core::{LockError, Op};
use tokio_postgres::Row;
use tokio_postgres::types::{ToSql, Type};

use super::table::{Filter, SHOWN, leases_sql, read_write_sql, schema, semaphores_sql};
use crate::error::unexpected;
use crate::executor::Executor;
use crate::sql::TABLE;

/// The held locks of the lease table that `filter` covers (every kind), and how many rows the
/// server returned. The kinds' queries run at once, each on a pooled connection.
///
/// # Errors
/// [`LockError::Timeout`] / [`LockError::Backend`] when a query fails or is slow.
pub(super) async fn read(
    exec: &Executor,
    filter: &Filter,
    node: &str,
) -> Result<(Vec<HeldLock>, u64), LockError> {
    let schema = schema(exec).await?;
    if !schema.leases {
        return Ok((Vec::new(), 0));
    }
    let value = filter.value();
    let params: [(&(dyn ToSql + Sync), Type); 2] = [(&value, Type::TEXT), (&SHOWN, Type::INT4)];
    let leases_sql = leases_sql(schema, filter);
    let (rw_sql, sem_sql) = (
        read_write_sql(schema, filter),
        semaphores_sql(schema, filter),
    );
    let leases = exec.query(Op::Read, &leases_sql, &params);
    let (leases, rw, sem) = if schema.kinds {
        let rw = exec.query(Op::Read, &rw_sql, &params);
        let sem = exec.query(Op::Read, &sem_sql, &params);
        futures::try_join!(leases, rw, sem)?
    } else {
        (leases.await?, Vec::new(), Vec::new())
    };
    let rows = (leases.len() + rw.len() + sem.len()) as u64;
    let mut locks = Vec::with_capacity(leases.len() + rw.len() + sem.len());
    let bad = |e: tokio_postgres::Error| unexpected(Op::Read, e);
    for row in &leases {
        locks.push(lease_lock(row, node).map_err(bad)?);
    }
    for row in &rw {
        locks.push(read_write_lock(row, node).map_err(bad)?);
    }
    for row in &sem {
        locks.push(semaphore_lock(row, node).map_err(bad)?);
    }
    Ok((locks, rows))
}

/// A count or a fencing token read as `int8`, as the unsigned number it is.
fn unsigned(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

/// A holder: its token, TTL left (ms) and grant's date (Unix ms), where known.
fn holder(token: String, ttl_ms: Option<i64>, since_ms: Option<i64>) -> HolderView {
    let mut view = HolderView::new(token);
    if let Some(ms) = ttl_ms {
        view = view.ttl(Duration::from_millis(unsigned(ms)));
    }
    if let Some(ms) = since_ms.and_then(|ms| u64::try_from(ms).ok()) {
        view = view.since(UNIX_EPOCH + Duration::from_millis(ms));
    }
    view
}

/// A mutex row (a fair lock when its queue is not empty), with its holder's note.
fn lease_lock(row: &Row, node: &str) -> Result<HeldLock, tokio_postgres::Error> {
    let fence = unsigned(row.try_get(2)?);
    let queued: i64 = row.try_get(5)?;
    let head: Option<Vec<String>> = row.try_get(6)?;
    let mut view = holder(row.try_get(1)?, row.try_get(3)?, row.try_get(7)?).fencing_token(fence);
    if let Some(note) = row.try_get::<_, Option<Vec<u8>>>(4)? {
        view = view.note(note);
    }
    let kind = if queued > 0 {
        HeldKind::Fair
    } else {
        HeldKind::Mutex
    };
    let mut lock = HeldLock::new(row.try_get::<_, String>(0)?, TABLE, kind, node).holder(view);
    lock.last_fencing_token = Some(fence);
    lock.queued = unsigned(queued);
    lock.queue = head.unwrap_or_default();
    Ok(lock)
}

/// Holders from parallel arrays of tokens, remaining milliseconds, grants' dates and
/// (semaphores) permits, added to `lock`, whose holder count is then `count`.
fn with_holders(
    mut lock: HeldLock,
    count: i64,
    tokens: Option<Vec<String>>,
    ttls: Option<Vec<i64>>,
    since: Option<Vec<Option<i64>>>,
    permits: Option<Vec<i32>>,
) -> HeldLock {
    let (ttls, since) = (ttls.unwrap_or_default(), since.unwrap_or_default());
    let permits = permits.unwrap_or_default();
    for (i, token) in tokens.unwrap_or_default().into_iter().enumerate() {
        let mut view = holder(token, ttls.get(i).copied(), since.get(i).copied().flatten());
        if let Some(p) = permits.get(i).and_then(|p| u64::try_from(*p).ok()) {
            view = view.permits(p);
        }
        lock = lock.holder(view);
    }
    lock.holder_count = unsigned(count);
    lock
}

/// A read-write lock's row: held by its writer, else by its readers (who carry the last
/// write's fencing token).
fn read_write_lock(row: &Row, node: &str) -> Result<HeldLock, tokio_postgres::Error> {
    let name: String = row.try_get(0)?;
    let writer: Option<String> = row.try_get(1)?;
    let fence = unsigned(row.try_get(3)?);
    let mut lock = match writer {
        Some(writer) => {
            let view = holder(writer, row.try_get(2)?, row.try_get(8)?).fencing_token(fence);
            HeldLock::new(name, "distlock_rw", HeldKind::Write, node).holder(view)
        }
        None => {
            let mut lock = with_holders(
                HeldLock::new(name, "distlock_rw", HeldKind::Read, node),
                row.try_get(4)?,
                row.try_get(5)?,
                row.try_get(6)?,
                row.try_get(9)?,
                None,
            );
            for view in &mut lock.holders {
                view.fencing_token = Some(fence);
            }
            lock
        }
    };
    lock.last_fencing_token = Some(fence);
    lock.queued = unsigned(row.try_get(7)?);
    Ok(lock)
}

/// A semaphore's row.
fn semaphore_lock(row: &Row, node: &str) -> Result<HeldLock, tokio_postgres::Error> {
    let max: i32 = row.try_get(1)?;
    let mut lock = with_holders(
        HeldLock::new(
            row.try_get::<_, String>(0)?,
            "distlock_semaphores",
            HeldKind::Semaphore,
            node,
        ),
        row.try_get(3)?,
        row.try_get(4)?,
        row.try_get(5)?,
        row.try_get(7)?,
        row.try_get(6)?,
    );
    lock.max_permits = u64::try_from(max).ok();
    lock.permits_used = Some(unsigned(row.try_get(2)?));
    Ok(lock)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Unix milliseconds of `since`.
    fn ms(since: std::time::SystemTime) -> u128 {
        since
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis())
    }

    #[test]
    fn a_holder_has_what_the_row_tells() {
        let view = holder("t".into(), Some(1500), Some(1_700_000_000_000));
        assert_eq!(view.ttl, Some(Duration::from_millis(1500)));
        assert_eq!(view.since.map(ms), Some(1_700_000_000_000));
        assert_eq!(holder("t".into(), None, None).since, None);
    }
}
