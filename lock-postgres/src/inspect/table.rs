//! Reading the lease table for the operator reads: one query per kind (the mutex and fair
//! lock, the read-write lock, the semaphore), each over every matching name at once, so that a
//! listing costs the same few statements whether 1 or 10,000 locks are held. Time is the
//! server's (`clock_timestamp()`), as in the grants' own statements. Which tables exist is asked
//! first: a database migrated to an older schema version (or not at all, where only advisory
//! locks are used) shows what it has.

use std::time::{Duration, UNIX_EPOCH};

use lock_core::backend::{HeldKind, HeldLock, HolderView};
use lock_core::{Kind, Lease, LockError, Op, Token};
use tokio_postgres::Row;
use tokio_postgres::types::{ToSql, Type};

use crate::error::unexpected;
use crate::executor::Executor;
use crate::sql::TABLE;

/// At most this many readers, semaphore holders or fair waiters are read per lock (the counts
/// are always exact): lock-core's `MAX_HOLDERS_SHOWN` (a test keeps them equal).
const SHOWN: i32 = 50;

/// Which names a read covers.
pub(super) enum Filter {
    /// A listing: names `LIKE` this (a glob's [`like_prefix`]; the glob itself is matched
    /// afterwards, and is authoritative).
    Like(String),
    /// One name.
    Name(String),
}

impl Filter {
    /// The condition on `column`, with the filter as `$1`.
    fn on(&self, column: &str) -> String {
        match self {
            Self::Like(_) => format!("{column} LIKE $1"),
            Self::Name(_) => format!("{column} = $1"),
        }
    }

    fn value(&self) -> &str {
        match self {
            Self::Like(like) | Self::Name(like) => like,
        }
    }
}

/// The `LIKE` pattern of a glob: its `*` and `?` as `%` and `_`, up to its first `[` (where
/// `%` ends it); `%`, `_` and `\` escaped. Never narrower than the glob.
pub(super) fn like_prefix(glob: &str) -> String {
    let mut like = String::with_capacity(glob.len() + 1);
    for c in glob.chars() {
        match c {
            '*' => like.push('%'),
            '?' => like.push('_'),
            '[' => {
                like.push('%');
                return like;
            }
            '%' | '_' | '\\' => {
                like.push('\\');
                like.push(c);
            }
            c => like.push(c),
        }
    }
    like
}

/// The tables (and columns) of the schema the database has.
#[derive(Debug, Clone, Copy)]
struct Schema {
    /// The lease table (version 1): mutexes and fair locks.
    leases: bool,
    /// The read-write lock, the semaphore and the fair queue (version 2).
    kinds: bool,
    /// `distlock_notes` (version 3): holders' notes.
    notes: bool,
    /// `granted_at` (version 5): when each holder was granted its lock.
    granted: bool,
}

/// Which of the schema's tables exist (under the connection's `search_path`, as the grants
/// find them), and whether the lease table has `granted_at`.
const SCHEMA: &str = "\
SELECT to_regclass('distlock_leases') IS NOT NULL,
    to_regclass('distlock_rw') IS NOT NULL AND to_regclass('distlock_rw_readers') IS NOT NULL
        AND to_regclass('distlock_rw_waiting') IS NOT NULL
        AND to_regclass('distlock_semaphores') IS NOT NULL
        AND to_regclass('distlock_permits') IS NOT NULL
        AND to_regclass('distlock_fair_queue') IS NOT NULL,
    to_regclass('distlock_notes') IS NOT NULL,
    EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = to_regclass('distlock_leases')
        AND a.attname = 'granted_at' AND NOT a.attisdropped)";

async fn schema(exec: &Executor) -> Result<Schema, LockError> {
    let rows = exec.query(Op::Read, SCHEMA, &[]).await?;
    let row = rows.first();
    let flag = |i: usize| row.and_then(|r| r.try_get::<_, bool>(i).ok()) == Some(true);
    Ok(Schema {
        leases: flag(0),
        kinds: flag(1),
        notes: flag(2),
        granted: flag(3),
    })
}

/// Milliseconds from `now.t` to the column `t`, at least 0, rounded up (the migration's
/// `distlock_ms_until`, inlined so that schema version 1 needs no function).
fn ms_until(t: &str) -> String {
    format!("greatest(0, ceil(extract(epoch FROM {t} - now.t) * 1000))::int8")
}

/// The column `t` (`granted_at`) as Unix milliseconds, or null before schema version 5.
fn unix_ms(schema: Schema, t: &str) -> String {
    if schema.granted {
        format!("(extract(epoch FROM {t}) * 1000)::int8")
    } else {
        "NULL::int8".to_owned()
    }
}

/// Held mutexes and fair locks: the lease row, the note its token wrote, and the live queue.
fn leases_sql(schema: Schema, filter: &Filter) -> String {
    let (note, notes) = if schema.notes {
        (
            "n.note",
            "LEFT JOIN distlock_notes n ON n.name = l.name AND n.token = l.token",
        )
    } else {
        ("NULL::bytea", "")
    };
    let (queue, queues) = if schema.kinds {
        (
            "coalesce(q.queued, 0)::int8, q.head",
            format!(
                "LEFT JOIN (SELECT f.name, count(*) AS queued,
            (array_agg(f.token ORDER BY f.arrival))[1:$2] AS head
        FROM distlock_fair_queue f, now
        WHERE f.lapses_at > now.t AND {}
        GROUP BY f.name) q ON q.name = l.name",
                filter.on("f.name")
            ),
        )
    } else {
        ("0::int8, NULL::text[]", String::new())
    };
    format!(
        "WITH now AS (SELECT clock_timestamp() AS t)
SELECT l.name, l.token, l.fencing_token, {ttl}, {note}, {queue}, {since}
FROM now, {TABLE} l
    {notes}
    {queues}
WHERE l.token IS NOT NULL AND l.expires_at > now.t AND {on} AND $2 > 0",
        ttl = ms_until("l.expires_at"),
        since = unix_ms(schema, "l.granted_at"),
        on = filter.on("l.name"),
    )
}

/// Read-write locks with a live writer or live readers: the writer, the last write's fencing
/// token, the readers (count and the first few by expiry), the waiting writers' records.
fn read_write_sql(schema: Schema, filter: &Filter) -> String {
    format!(
        "WITH now AS (SELECT clock_timestamp() AS t)
SELECT w.name,
    CASE WHEN w.writer IS NOT NULL AND w.expires_at > now.t THEN w.writer END,
    CASE WHEN w.writer IS NOT NULL AND w.expires_at > now.t THEN {writer_ttl} END,
    w.fencing_token,
    coalesce(r.readers, 0)::int8, r.tokens, r.ttls,
    coalesce(ww.waiting, 0)::int8,
    {writer_since}, r.since
FROM now, distlock_rw w
    LEFT JOIN (SELECT x.name, count(*) AS readers,
            (array_agg(x.token ORDER BY x.expires_at))[1:$2] AS tokens,
            (array_agg({reader_ttl} ORDER BY x.expires_at))[1:$2] AS ttls,
            (array_agg({reader_since} ORDER BY x.expires_at))[1:$2] AS since
        FROM distlock_rw_readers x, now
        WHERE x.expires_at > now.t AND {on_readers}
        GROUP BY x.name) r ON r.name = w.name
    LEFT JOIN (SELECT y.name, count(*) AS waiting
        FROM distlock_rw_waiting y, now
        WHERE y.lapses_at > now.t AND {on_waiting}
        GROUP BY y.name) ww ON ww.name = w.name
WHERE {on} AND ((w.writer IS NOT NULL AND w.expires_at > now.t) OR r.readers > 0)",
        writer_ttl = ms_until("w.expires_at"),
        reader_ttl = ms_until("x.expires_at"),
        writer_since = unix_ms(schema, "w.granted_at"),
        reader_since = unix_ms(schema, "x.granted_at"),
        on_readers = filter.on("x.name"),
        on_waiting = filter.on("y.name"),
        on = filter.on("w.name"),
    )
}

/// Semaphores with live holders: the max, the permits in use, the holders (count and the first
/// few by expiry, with the permits each holds).
fn semaphores_sql(schema: Schema, filter: &Filter) -> String {
    format!(
        "WITH now AS (SELECT clock_timestamp() AS t)
SELECT s.name, s.max, p.used, p.holders, p.tokens, p.ttls, p.permits, p.since
FROM now, distlock_semaphores s
    JOIN (SELECT x.name, sum(x.permits)::int8 AS used, count(*) AS holders,
            (array_agg(x.token ORDER BY x.expires_at))[1:$2] AS tokens,
            (array_agg({ttl} ORDER BY x.expires_at))[1:$2] AS ttls,
            (array_agg(x.permits ORDER BY x.expires_at))[1:$2] AS permits,
            (array_agg({since} ORDER BY x.expires_at))[1:$2] AS since
        FROM distlock_permits x, now
        WHERE x.expires_at > now.t AND {on_permits}
        GROUP BY x.name) p ON p.name = s.name
WHERE {on}",
        ttl = ms_until("x.expires_at"),
        since = unix_ms(schema, "x.granted_at"),
        on_permits = filter.on("x.name"),
        on = filter.on("s.name"),
    )
}

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

/// Which lease of `name` the token holds now, in every table a token lives in (and whether a
/// fair queue waits behind a mutex row). One statement.
fn holder_sql(schema: Schema) -> String {
    let live = "expires_at > clock_timestamp()";
    if !schema.kinds {
        return format!(
            "SELECT 'lease', false FROM {TABLE} WHERE name = $1 AND token = $2 AND {live}"
        );
    }
    format!(
        "SELECT 'lease', EXISTS (SELECT 1 FROM distlock_fair_queue q
        WHERE q.name = $1 AND q.lapses_at > clock_timestamp())
    FROM {TABLE} WHERE name = $1 AND token = $2 AND {live}
UNION ALL SELECT 'writer', false FROM distlock_rw WHERE name = $1 AND writer = $2 AND {live}
UNION ALL SELECT 'reader', false FROM distlock_rw_readers WHERE name = $1 AND token = $2 AND {live}
UNION ALL SELECT 'permits', false FROM distlock_permits WHERE name = $1 AND token = $2 AND {live}"
    )
}

/// The lease that `token` holds on `name` now, of the kind it holds it as, for the lock's own
/// release of that kind (which announces it, and tells a fair queue's head); `None` when the
/// token holds nothing of `name` (another token holds it, or nobody).
///
/// # Errors
/// [`LockError::Timeout`] / [`LockError::Backend`] when the query fails or is slow;
/// [`LockError::InvalidInput`] when `name` is held with `token` but it is not a distlock token
/// (another client's row: the lock's statements cannot release it).
pub(super) async fn lease_of(
    exec: &Executor,
    name: &str,
    token: &str,
) -> Result<Option<Lease>, LockError> {
    let schema = schema(exec).await?;
    if !schema.leases {
        return Ok(None);
    }
    let sql = holder_sql(schema);
    let rows = exec
        .query(
            Op::Release,
            &sql,
            &[(&name, Type::TEXT), (&token, Type::TEXT)],
        )
        .await?;
    let Some(row) = rows.first() else {
        return Ok(None);
    };
    let read = |row: &Row| -> Result<(String, bool), tokio_postgres::Error> {
        Ok((row.try_get(0)?, row.try_get(1)?))
    };
    let (table, queued) = read(row).map_err(|e| unexpected(Op::Release, e))?;
    // A token the library wrote is 32 hex characters; one that is not cannot be released
    // through the library's statements.
    let parsed: Token = token.parse().map_err(|_| {
        LockError::invalid(format!(
            "{name:?} is held with {token:?}, which is not a distlock token"
        ))
    })?;
    // Only the kind's table matters to a release; the numbers in it are not read.
    let kind = match table.as_str() {
        "lease" if queued => Kind::Fair { queued: true },
        "writer" => Kind::Write {
            writer_preference: true,
        },
        "reader" => Kind::Read {
            writer_preference: true,
        },
        "permits" => Kind::Semaphore { permits: 1, max: 1 },
        _ => Kind::Mutex,
    };
    let now = tokio::time::Instant::now();
    Ok(Some(Lease::new(name, parsed, 0, now).with_kind(kind)))
}

/// When `since` is, for tests: Unix milliseconds.
#[cfg(test)]
fn ms(since: std::time::SystemTime) -> u128 {
    since
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn like_patterns_are_never_narrower_than_the_glob() {
        assert_eq!(like_prefix("*"), "%");
        assert_eq!(like_prefix("order:1?"), "order:1_");
        assert_eq!(like_prefix("a_b%c\\*"), "a\\_b\\%c\\\\%");
        assert_eq!(like_prefix("job:[ab]*x"), "job:%");
        assert_eq!(like_prefix("exact"), "exact");
    }

    #[test]
    fn as_many_holders_are_read_as_lock_core_shows() {
        assert_eq!(
            usize::try_from(SHOWN).ok(),
            Some(lock_core::backend::MAX_HOLDERS_SHOWN)
        );
    }

    #[test]
    fn a_holder_has_what_the_row_tells() {
        let view = holder("t".into(), Some(1500), Some(1_700_000_000_000));
        assert_eq!(view.ttl, Some(Duration::from_millis(1500)));
        assert_eq!(view.since.map(ms), Some(1_700_000_000_000));
        assert_eq!(holder("t".into(), None, None).since, None);
    }
}
