//! The lease table's queries for the operator reads: one per kind (the mutex and fair lock,
//! the read-write lock, the semaphore), each over every matching name at once, so that a
//! listing costs the same few statements whether 1 or 10,000 locks are held. Time is the
//! server's (`clock_timestamp()`), as in the grants' own statements. Which tables exist is asked
//! first ([`schema`]): a database migrated to an older schema version (or not at all, where only
//! advisory locks are used) shows what it has. The rows are read in `rows.rs`, a token's lease
//! found for its release in `release.rs`.

use lock_core::{LockError, Op};

use crate::executor::Executor;
use crate::sql::TABLE;

/// At most this many readers, semaphore holders or fair waiters are read per lock (the counts
/// are always exact): lock-core's `MAX_HOLDERS_SHOWN` (a test keeps them equal).
pub(super) const SHOWN: i32 = 50;

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

    /// The filter's value, `$1`.
    pub(super) fn value(&self) -> &str {
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
pub(super) struct Schema {
    /// The lease table (version 1): mutexes and fair locks.
    pub(super) leases: bool,
    /// The read-write lock, the semaphore and the fair queue (version 2).
    pub(super) kinds: bool,
    /// `distlock_notes` (version 3): holders' notes.
    pub(super) notes: bool,
    /// `granted_at` (version 5): when each holder was granted its lock.
    pub(super) granted: bool,
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

/// Which tables (and columns) of the schema the database has: one query.
///
/// # Errors
/// [`LockError::Timeout`] / [`LockError::Backend`] when the query fails or is slow.
pub(super) async fn schema(exec: &Executor) -> Result<Schema, LockError> {
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
pub(super) fn leases_sql(schema: Schema, filter: &Filter) -> String {
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
pub(super) fn read_write_sql(schema: Schema, filter: &Filter) -> String {
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
pub(super) fn semaphores_sql(schema: Schema, filter: &Filter) -> String {
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
}
