//! Reading lock-postgres's lease table: one query per kind (the mutex and fair lock, the
//! read-write lock, the semaphore), each over every matching name at once, so that a listing
//! costs the same few statements whether 1 or 10,000 locks are held. Time is the server's
//! (`clock_timestamp()`), as in the library's own statements. Which tables exist is asked
//! first: a database migrated to an older schema version (or not at all, where only advisory
//! locks are used) shows what it has.

use std::time::Duration;

use lock_core::backend::Holder;
use lock_core::{Kind, Lease, Token};
use lock_postgres::tokio_postgres::types::{ToSql, Type};
use lock_postgres::tokio_postgres::{self, Client, Row};

use super::postgres_target::PostgresTarget;
use crate::exit::{FAILURE, Failure};
use crate::inspect::{LockInfo, Member, Members, Permits};

/// At most this many readers, semaphore holders or fair waiters are listed per lock (the counts
/// are always exact), as on Redis.
const MEMBERS_SHOWN: i32 = 50;

/// Which names a read covers.
pub(super) enum Filter {
    /// `ls`: names `LIKE` this (the pattern's literal prefix; the glob itself is matched on the
    /// client, and is authoritative).
    Like(String),
    /// `show`: this name.
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

/// The tables of lock-postgres's schema the database has.
#[derive(Debug, Clone, Copy)]
struct Schema {
    /// `distlock_leases` (version 1): mutexes and fair locks.
    leases: bool,
    /// The read-write lock, the semaphore and the fair queue (version 2).
    kinds: bool,
    /// `distlock_notes` (version 3): holders' notes.
    notes: bool,
}

/// Which of the schema's tables exist (under the connection's `search_path`, as the library
/// finds them).
const SCHEMA: &str = "\
SELECT to_regclass('distlock_leases') IS NOT NULL,
    to_regclass('distlock_rw') IS NOT NULL AND to_regclass('distlock_rw_readers') IS NOT NULL
        AND to_regclass('distlock_rw_waiting') IS NOT NULL
        AND to_regclass('distlock_semaphores') IS NOT NULL
        AND to_regclass('distlock_permits') IS NOT NULL
        AND to_regclass('distlock_fair_queue') IS NOT NULL,
    to_regclass('distlock_notes') IS NOT NULL";

async fn schema(target: &PostgresTarget, client: &Client) -> Result<Schema, Failure> {
    let rows = target
        .bounded("reading the schema", client.query_typed(SCHEMA, &[]))
        .await?;
    let row = rows.first();
    let flag = |i: usize| row.and_then(|r| r.try_get::<_, bool>(i).ok()) == Some(true);
    Ok(Schema {
        leases: flag(0),
        kinds: flag(1),
        notes: flag(2),
    })
}

/// Milliseconds from `now.t` to the column `t`, at least 0, rounded up (the library's
/// `distlock_ms_until`, inlined so that schema version 1 needs no function).
fn ms_until(t: &str) -> String {
    format!("greatest(0, ceil(extract(epoch FROM {t} - now.t) * 1000))::int8")
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
SELECT l.name, l.token, l.fencing_token, {ttl}, {note}, {queue}
FROM now, distlock_leases l
    {notes}
    {queues}
WHERE l.token IS NOT NULL AND l.expires_at > now.t AND {on} AND $2 > 0",
        ttl = ms_until("l.expires_at"),
        on = filter.on("l.name"),
    )
}

/// Read-write locks with a live writer or live readers: the writer, the last write's fencing
/// token, the readers (count and the first few by expiry), the waiting writers' records.
fn read_write_sql(filter: &Filter) -> String {
    format!(
        "WITH now AS (SELECT clock_timestamp() AS t)
SELECT w.name,
    CASE WHEN w.writer IS NOT NULL AND w.expires_at > now.t THEN w.writer END,
    CASE WHEN w.writer IS NOT NULL AND w.expires_at > now.t THEN {writer_ttl} END,
    w.fencing_token,
    coalesce(r.readers, 0)::int8, r.tokens, r.ttls,
    coalesce(ww.waiting, 0)::int8
FROM now, distlock_rw w
    LEFT JOIN (SELECT x.name, count(*) AS readers,
            (array_agg(x.token ORDER BY x.expires_at))[1:$2] AS tokens,
            (array_agg({reader_ttl} ORDER BY x.expires_at))[1:$2] AS ttls
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
        on_readers = filter.on("x.name"),
        on_waiting = filter.on("y.name"),
        on = filter.on("w.name"),
    )
}

/// Semaphores with live holders: the max, the permits in use, the holders (count and the first
/// few by expiry, with the permits each holds).
fn semaphores_sql(filter: &Filter) -> String {
    format!(
        "WITH now AS (SELECT clock_timestamp() AS t)
SELECT s.name, s.max, p.used, p.holders, p.tokens, p.ttls, p.permits
FROM now, distlock_semaphores s
    JOIN (SELECT x.name, sum(x.permits)::int8 AS used, count(*) AS holders,
            (array_agg(x.token ORDER BY x.expires_at))[1:$2] AS tokens,
            (array_agg({ttl} ORDER BY x.expires_at))[1:$2] AS ttls,
            (array_agg(x.permits ORDER BY x.expires_at))[1:$2] AS permits
        FROM distlock_permits x, now
        WHERE x.expires_at > now.t AND {on_permits}
        GROUP BY x.name) p ON p.name = s.name
WHERE {on}",
        ttl = ms_until("x.expires_at"),
        on_permits = filter.on("x.name"),
        on = filter.on("s.name"),
    )
}

/// The held locks of the lease table that `filter` covers (every kind, sorted by name and
/// kind), and how many rows the server returned. The kinds' queries are sent together on one
/// connection (pipelined: one round trip for all).
///
/// # Errors
/// A backend failure when a query fails or is slow.
pub(super) async fn read(
    target: &PostgresTarget,
    client: &Client,
    filter: &Filter,
) -> Result<(Vec<LockInfo>, u64), Failure> {
    let schema = schema(target, client).await?;
    if !schema.leases {
        return Ok((Vec::new(), 0));
    }
    let value = filter.value();
    let shown = MEMBERS_SHOWN;
    let params: [(&(dyn ToSql + Sync), Type); 2] = [(&value, Type::TEXT), (&shown, Type::INT4)];
    let leases_sql = leases_sql(schema, filter);
    let (rw_sql, sem_sql) = (read_write_sql(filter), semaphores_sql(filter));
    let leases = target.bounded(
        "reading the lease table",
        client.query_typed(&leases_sql, &params),
    );
    let (leases, rw, sem) = if schema.kinds {
        let rw = target.bounded(
            "reading read-write locks",
            client.query_typed(&rw_sql, &params),
        );
        let sem = target.bounded("reading semaphores", client.query_typed(&sem_sql, &params));
        futures::try_join!(leases, rw, sem)?
    } else {
        (leases.await?, Vec::new(), Vec::new())
    };
    let rows = (leases.len() + rw.len() + sem.len()) as u64;
    let node = &target.node;
    let mut locks = Vec::with_capacity(leases.len() + rw.len() + sem.len());
    for row in &leases {
        locks.push(lease_lock(row, node).map_err(|e| unexpected(target, &e))?);
    }
    for row in &rw {
        locks.push(read_write_lock(row, node).map_err(|e| unexpected(target, &e))?);
    }
    for row in &sem {
        locks.push(semaphore_lock(row, node).map_err(|e| unexpected(target, &e))?);
    }
    Ok((locks, rows))
}

/// A row of a shape the queries cannot produce (a table altered by hand).
fn unexpected(target: &PostgresTarget, error: &tokio_postgres::Error) -> Failure {
    Failure::new(
        FAILURE,
        format!(
            "unexpected row from PostgreSQL at {}: {}",
            target.node,
            crate::exit::one_line(error)
        ),
    )
}

/// A count or a fencing token read as `int8`, as the unsigned number it is.
fn unsigned(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

/// A mutex row (a fair lock when its queue is not empty), with its holder's note.
fn lease_lock(row: &Row, node: &str) -> Result<LockInfo, tokio_postgres::Error> {
    let name: String = row.try_get(0)?;
    let token: String = row.try_get(1)?;
    let fence: i64 = row.try_get(2)?;
    let ttl_ms: i64 = row.try_get(3)?;
    let note: Option<Vec<u8>> = row.try_get(4)?;
    let queued: i64 = row.try_get(5)?;
    let head: Option<Vec<String>> = row.try_get(6)?;
    let holder = note.map(|note| {
        Holder::new(
            unsigned(fence),
            Some(Duration::from_millis(unsigned(ttl_ms))),
        )
        .with_note(note)
    });
    Ok(LockInfo {
        name,
        key: lock_postgres::TABLE.to_owned(),
        kind: if queued > 0 { "fair" } else { "mutex" },
        token: Some(token),
        ttl_ms: Some(ttl_ms),
        fencing_token: Some(unsigned(fence)),
        queued: unsigned(queued),
        fair_queue: head.unwrap_or_default(),
        holder,
        node: node.to_owned(),
        ..LockInfo::default()
    })
}

/// Members from parallel arrays of tokens, remaining milliseconds and (semaphores) permits.
fn members(
    count: i64,
    tokens: Option<Vec<String>>,
    ttls: Option<Vec<i64>>,
    permits: Option<Vec<i32>>,
) -> Members {
    let ttls = ttls.unwrap_or_default();
    let permits = permits.unwrap_or_default();
    Members {
        count: unsigned(count),
        shown: tokens
            .unwrap_or_default()
            .into_iter()
            .enumerate()
            .map(|(i, token)| Member {
                token,
                ttl_ms: ttls.get(i).copied().unwrap_or(0),
                permits: permits.get(i).and_then(|p| u64::try_from(*p).ok()),
            })
            .collect(),
    }
}

/// A read-write lock's row.
fn read_write_lock(row: &Row, node: &str) -> Result<LockInfo, tokio_postgres::Error> {
    let readers: i64 = row.try_get(4)?;
    let fence: i64 = row.try_get(3)?;
    Ok(LockInfo {
        name: row.try_get(0)?,
        key: "distlock_rw".to_owned(),
        kind: "read-write",
        token: row.try_get(1)?,
        ttl_ms: row.try_get(2)?,
        fencing_token: Some(unsigned(fence)),
        queued: unsigned(row.try_get(7)?),
        readers: Some(members(readers, row.try_get(5)?, row.try_get(6)?, None)),
        node: node.to_owned(),
        ..LockInfo::default()
    })
}

/// A semaphore's row.
fn semaphore_lock(row: &Row, node: &str) -> Result<LockInfo, tokio_postgres::Error> {
    let max: i32 = row.try_get(1)?;
    let used: i64 = row.try_get(2)?;
    let holders: i64 = row.try_get(3)?;
    Ok(LockInfo {
        name: row.try_get(0)?,
        key: "distlock_semaphores".to_owned(),
        kind: "semaphore",
        permits: Some(Permits {
            max: u64::try_from(max).ok(),
            used: Some(unsigned(used)),
            holders: members(holders, row.try_get(4)?, row.try_get(5)?, row.try_get(6)?),
        }),
        node: node.to_owned(),
        ..LockInfo::default()
    })
}

/// Which lease of `name` the token holds now, in every table a token lives in (and whether a
/// fair queue waits behind a mutex row). One statement.
fn holder_sql(schema: Schema) -> String {
    let live = "expires_at > clock_timestamp()";
    if !schema.kinds {
        return format!(
            "SELECT 'lease', false FROM distlock_leases WHERE name = $1 AND token = $2 AND {live}"
        );
    }
    format!(
        "SELECT 'lease', EXISTS (SELECT 1 FROM distlock_fair_queue q
        WHERE q.name = $1 AND q.lapses_at > clock_timestamp())
    FROM distlock_leases WHERE name = $1 AND token = $2 AND {live}
UNION ALL SELECT 'writer', false FROM distlock_rw WHERE name = $1 AND writer = $2 AND {live}
UNION ALL SELECT 'reader', false FROM distlock_rw_readers WHERE name = $1 AND token = $2 AND {live}
UNION ALL SELECT 'permits', false FROM distlock_permits WHERE name = $1 AND token = $2 AND {live}"
    )
}

/// The lease that `token` holds on `name` now, of the kind it holds it as, for the library's
/// own release of that kind (which announces it, and tells a fair queue's head); `None` when
/// the token holds nothing of `name` (another token holds it, or nobody).
///
/// # Errors
/// A backend failure when the query fails or is slow.
pub(super) async fn lease_of(
    target: &PostgresTarget,
    client: &Client,
    name: &str,
    token: &str,
) -> Result<Option<Lease>, Failure> {
    let schema = schema(target, client).await?;
    if !schema.leases {
        return Ok(None);
    }
    let sql = holder_sql(schema);
    let rows = target
        .bounded(
            "finding the token's lease",
            client.query_typed(&sql, &[(&name, Type::TEXT), (&token, Type::TEXT)]),
        )
        .await?;
    let Some(row) = rows.first() else {
        return Ok(None);
    };
    let (table, queued): (String, bool) = (
        row.try_get(0).map_err(|e| unexpected(target, &e))?,
        row.try_get(1).map_err(|e| unexpected(target, &e))?,
    );
    // A token the library wrote is 32 hex characters; one that is not cannot be released
    // through the library's statements.
    let parsed: Token = token.parse().map_err(|_| {
        Failure::new(
            FAILURE,
            format!("{name:?} is held with {token:?}, which is not a distlock token"),
        )
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

#[cfg(test)]
mod tests {
    use super::like_prefix;

    #[test]
    fn like_patterns_are_never_narrower_than_the_glob() {
        assert_eq!(like_prefix("*"), "%");
        assert_eq!(like_prefix("order:1?"), "order:1_");
        assert_eq!(like_prefix("a_b%c\\*"), "a\\_b\\%c\\\\%");
        assert_eq!(like_prefix("job:[ab]*x"), "job:%");
        assert_eq!(like_prefix("exact"), "exact");
    }
}
