//! The lease tables' holders and waiters, read in one statement (one snapshot): a row per
//! live holder of every kind and per waiter in line, grouped here into one [`HeldLock`] per
//! name and kind. Time is the server's, as in the grants' own statements.

use std::collections::BTreeMap;
use std::time::{Duration, UNIX_EPOCH};

use futures::FutureExt;
use lock_core::backend::{HeldKind, HeldLock, HolderView};
use lock_core::{LockError, Op};
use sqlx::Row;
use sqlx::mysql::MySqlRow;

use super::Filter;
use crate::error::unexpected;
use crate::executor::Executor;
use crate::sql::{TABLE, now_us};

/// Where a read-write lock lives (its anchor row), as a listing names it.
const READ_WRITE_TABLE: &str = "distlock_rw";
/// Where a semaphore lives (its anchor row), as a listing names it.
const SEMAPHORE_TABLE: &str = "distlock_semaphores";

/// Milliseconds from now to the µs column `$t`, at least 0, rounded up.
macro_rules! ms_left {
    ($t:literal) => {
        concat!(
            "CAST(GREATEST(0, CEIL((",
            $t,
            " - ",
            now_us!(),
            ") / 1000)) AS SIGNED)"
        )
    };
}

/// One row per live holder and waiter of the names `{on}` covers (`{on}` is the filter's
/// condition, one bound value per part): what it is, the name, the token, the fencing token,
/// the ms left, the time of grant (µs), the note, the permits, the semaphore's size, and the
/// order within the name (grant time; a fair queue's arrival). A reader's fencing token is the
/// last write's.
fn holders_sql(on: &str) -> String {
    let parts = [
        concat!(
            "SELECT 'lease' AS what, l.name, l.token, l.fencing_token, ",
            ms_left!("l.expires_at"),
            " AS left_ms, l.granted_at, n.note, NULL AS permits, NULL AS max, l.granted_at AS ord\n",
            "FROM distlock_leases l LEFT JOIN distlock_notes n ON n.name = l.name AND n.token = l.token\n",
            "WHERE l.token IS NOT NULL AND l.expires_at > ",
            now_us!(),
            " AND l.name {on}"
        ),
        concat!(
            "SELECT 'queued', q.name, q.token, NULL, NULL, NULL, NULL, NULL, NULL, q.arrival\n",
            "FROM distlock_fair_queue q WHERE q.lapses_at > ",
            now_us!(),
            " AND q.name {on}"
        ),
        concat!(
            "SELECT 'writer', w.name, w.writer, w.fencing_token, ",
            ms_left!("w.expires_at"),
            ", w.granted_at, NULL, NULL, NULL, w.granted_at\n",
            "FROM distlock_rw w WHERE w.writer IS NOT NULL AND w.expires_at > ",
            now_us!(),
            " AND w.name {on}"
        ),
        concat!(
            "SELECT 'reader', r.name, r.token, w.fencing_token, ",
            ms_left!("r.expires_at"),
            ", r.granted_at, NULL, NULL, NULL, r.granted_at\n",
            "FROM distlock_rw_readers r JOIN distlock_rw w ON w.name = r.name\n",
            "WHERE r.expires_at > ",
            now_us!(),
            " AND r.name {on}"
        ),
        concat!(
            "SELECT 'waiting', y.name, y.token, NULL, NULL, NULL, NULL, NULL, NULL, NULL\n",
            "FROM distlock_rw_waiting y WHERE y.lapses_at > ",
            now_us!(),
            " AND y.name {on}"
        ),
        concat!(
            "SELECT 'permits', p.name, p.token, NULL, ",
            ms_left!("p.expires_at"),
            ", p.granted_at, NULL, CAST(p.permits AS SIGNED), CAST(s.max AS SIGNED), p.granted_at\n",
            "FROM distlock_permits p JOIN distlock_semaphores s ON s.name = p.name\n",
            "WHERE p.expires_at > ",
            now_us!(),
            " AND p.name {on}"
        ),
    ];
    let mut sql = parts
        .iter()
        .map(|part| part.replace("{on}", on))
        .collect::<Vec<_>>()
        .join("\nUNION ALL ");
    sql.push_str("\nORDER BY 2, 1, 10");
    sql
}

/// How many parts [`holders_sql`] has: each binds the filter's value once.
const PARTS: usize = 6;

/// The holds of the lease tables that `filter` covers, and how many rows were read.
pub(super) async fn read(
    exec: &Executor,
    filter: &Filter,
    node: &str,
) -> Result<(Vec<HeldLock>, u64), LockError> {
    let sql = holders_sql(filter.condition());
    let value = filter.value().to_owned();
    let rows = exec
        .run(
            Op::Read,
            Box::new(move |c| {
                async move {
                    let mut query = sqlx::query(&sql);
                    for _ in 0..PARTS {
                        query = query.bind(value.clone());
                    }
                    query.fetch_all(c).await
                }
                .boxed()
            }),
        )
        .await?;
    let scanned = rows.len() as u64;
    let mut found = Found::default();
    for row in &rows {
        found
            .add(row, node)
            .map_err(|e| unexpected(Op::Read, format!("a row of the lease tables: {e}")))?;
    }
    Ok((found.finish(), scanned))
}

/// The holds found so far, by name and kind, and the waiters in line by name.
#[derive(Default)]
struct Found {
    locks: BTreeMap<(String, &'static str), HeldLock>,
    /// A fair lock's queue (tokens, first in line first).
    queues: BTreeMap<String, Vec<String>>,
    /// Writers waiting on a read-write lock.
    waiting: BTreeMap<String, u64>,
}

impl Found {
    fn add(&mut self, row: &MySqlRow, node: &str) -> Result<(), sqlx::Error> {
        let what: String = row.try_get(0)?;
        let name = text(row.try_get(1)?);
        let token = text(row.try_get(2)?);
        match what.as_str() {
            "queued" => self.queues.entry(name).or_default().push(token),
            "waiting" => *self.waiting.entry(name).or_default() += 1,
            _ => {
                let (kind, key) = match what.as_str() {
                    "lease" => (HeldKind::Mutex, TABLE),
                    "writer" => (HeldKind::Write, READ_WRITE_TABLE),
                    "reader" => (HeldKind::Read, READ_WRITE_TABLE),
                    _ => (HeldKind::Semaphore, SEMAPHORE_TABLE),
                };
                let fence: Option<i64> = row.try_get(3)?;
                let mut holder = HolderView::new(token).ttl(Duration::from_millis(unsigned(
                    row.try_get::<Option<i64>, _>(4)?.unwrap_or(0),
                )));
                if let Some(granted) = row.try_get::<Option<i64>, _>(5)? {
                    holder = holder.since(UNIX_EPOCH + Duration::from_micros(unsigned(granted)));
                }
                if let Some(note) = row.try_get::<Option<Vec<u8>>, _>(6)? {
                    holder = holder.note(note);
                }
                let permits: Option<i64> = row.try_get(7)?;
                let max: Option<i64> = row.try_get(8)?;
                // Only a grant of its own carries a fencing token: the mutex's and the writer's.
                if matches!(kind, HeldKind::Mutex | HeldKind::Write)
                    && let Some(fence) = fence
                {
                    holder = holder.fencing_token(unsigned(fence));
                }
                if let Some(permits) = permits {
                    holder = holder.permits(unsigned(permits));
                }
                let lock = self
                    .locks
                    .remove(&(name.clone(), kind.as_str()))
                    .unwrap_or_else(|| HeldLock::new(name.clone(), key, kind, node));
                let mut lock = lock.holder(holder);
                lock.last_fencing_token = fence.map(unsigned).or(lock.last_fencing_token);
                if kind == HeldKind::Semaphore {
                    lock.max_permits = max.map(unsigned);
                    lock.permits_used =
                        Some(lock.permits_used.unwrap_or(0) + permits.map_or(0, unsigned));
                }
                self.locks.insert((name, kind.as_str()), lock);
            }
        }
        Ok(())
    }

    /// The holds, with their waiters: a mutex with a queue is a fair lock (a fair lock nobody
    /// waits for is a mutex row like any other), a read-write lock counts its waiting writers.
    fn finish(mut self) -> Vec<HeldLock> {
        let mut locks: Vec<HeldLock> = std::mem::take(&mut self.locks).into_values().collect();
        for lock in &mut locks {
            match lock.kind {
                HeldKind::Mutex => {
                    if let Some(queue) = self.queues.remove(&lock.name) {
                        lock.kind = HeldKind::Fair;
                        lock.queued = queue.len() as u64;
                        lock.queue = queue;
                    }
                }
                HeldKind::Read | HeldKind::Write => {
                    lock.queued = self.waiting.get(&lock.name).copied().unwrap_or(0);
                }
                _ => {}
            }
        }
        locks
    }
}

fn unsigned(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

fn text(bytes: Option<Vec<u8>>) -> String {
    String::from_utf8_lossy(&bytes.unwrap_or_default()).into_owned()
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_part_binds_the_filter_once() {
        let sql = super::holders_sql("= ?");
        assert_eq!(sql.matches("= ?").count(), super::PARTS);
        assert!(!sql.contains("{on}"));
    }
}
