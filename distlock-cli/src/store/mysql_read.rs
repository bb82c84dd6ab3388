//! Reading lock-mysql's lease table: one query per kind (the mutex and fair lock, the
//! read-write lock, the semaphore), each over every matching name at once. Time is the
//! server's (`UNIX_TIMESTAMP(NOW(6))` in µs), as in the library's own statements. Readers and
//! semaphore holders are counted, not listed.

use std::time::Duration;

use lock_core::backend::Holder;
use lock_core::{Kind, Lease, Token};
use lock_mysql::sqlx::{self, Row, mysql::MySqlRow};

use super::mysql_target::MysqlTarget;
use crate::exit::{FAILURE, Failure};
use crate::inspect::{LockInfo, Members, Permits};

/// The server's clock in µs.
const NOW: &str = "CAST(UNIX_TIMESTAMP(NOW(6)) * 1000000 AS SIGNED)";

/// Which names a read covers: `LIKE` the glob's literal prefix (`ls`), or one name (`show`).
pub(super) enum Filter {
    Like(String),
    Name(String),
}

impl Filter {
    fn on(&self, column: &str) -> String {
        match self {
            Self::Like(_) => format!("{column} LIKE ?"),
            Self::Name(_) => format!("{column} = ?"),
        }
    }

    fn value(&self) -> &str {
        match self {
            Self::Like(v) | Self::Name(v) => v,
        }
    }
}

/// Milliseconds from now to the µs column `t`, at least 0, rounded up.
fn ms_until(t: &str) -> String {
    format!("CAST(GREATEST(0, CEIL(({t} - {NOW}) / 1000)) AS SIGNED)")
}

fn leases_sql(filter: &Filter) -> String {
    format!(
        "SELECT l.name, l.token, l.fencing_token, {ttl}, n.note,
    (SELECT COUNT(*) FROM distlock_fair_queue q WHERE q.name = l.name AND q.lapses_at > {NOW})
FROM distlock_leases l LEFT JOIN distlock_notes n ON n.name = l.name AND n.token = l.token
WHERE l.token IS NOT NULL AND l.expires_at > {NOW} AND {on}",
        ttl = ms_until("l.expires_at"),
        on = filter.on("l.name"),
    )
}

fn read_write_sql(filter: &Filter) -> String {
    format!(
        "SELECT w.name, IF(w.writer IS NOT NULL AND w.expires_at > {NOW}, w.writer, NULL),
    IF(w.writer IS NOT NULL AND w.expires_at > {NOW}, {ttl}, NULL), w.fencing_token,
    (SELECT COUNT(*) FROM distlock_rw_readers r WHERE r.name = w.name AND r.expires_at > {NOW}),
    (SELECT COUNT(*) FROM distlock_rw_waiting y WHERE y.name = w.name AND y.lapses_at > {NOW})
FROM distlock_rw w
WHERE {on} AND ((w.writer IS NOT NULL AND w.expires_at > {NOW})
    OR EXISTS (SELECT 1 FROM distlock_rw_readers r WHERE r.name = w.name AND r.expires_at > {NOW}))",
        ttl = ms_until("w.expires_at"),
        on = filter.on("w.name"),
    )
}

fn semaphores_sql(filter: &Filter) -> String {
    format!(
        "SELECT s.name, s.max, CAST(SUM(p.permits) AS SIGNED), COUNT(*)
FROM distlock_semaphores s JOIN distlock_permits p ON p.name = s.name AND p.expires_at > {NOW}
WHERE {on} GROUP BY s.name, s.max",
        on = filter.on("s.name"),
    )
}

/// The held locks `filter` covers, and how many rows were read.
pub(super) async fn read(
    target: &MysqlTarget,
    filter: &Filter,
) -> Result<(Vec<LockInfo>, u64), Failure> {
    let value = filter.value().to_owned();
    let run = |sql: String, what: &'static str| {
        let value = value.clone();
        async move {
            let query = sqlx::query(&sql).bind(value).fetch_all(target.lock.pool());
            target.bounded(what, query).await
        }
    };
    let (leases, rw, sem) = futures::try_join!(
        run(leases_sql(filter), "reading the lease table"),
        run(read_write_sql(filter), "reading read-write locks"),
        run(semaphores_sql(filter), "reading semaphores"),
    )?;
    let rows = (leases.len() + rw.len() + sem.len()) as u64;
    let mut locks = Vec::with_capacity(leases.len() + rw.len() + sem.len());
    let node = &target.node;
    let bad = |e: sqlx::Error| unexpected(target, &e);
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

fn unexpected(target: &MysqlTarget, error: &sqlx::Error) -> Failure {
    Failure::new(
        FAILURE,
        format!(
            "unexpected row from MySQL at {}: {}",
            target.node,
            crate::exit::one_line(error)
        ),
    )
}

fn unsigned(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

fn text(bytes: Vec<u8>) -> String {
    String::from_utf8_lossy(&bytes).into_owned()
}

fn lease_lock(row: &MySqlRow, node: &str) -> Result<LockInfo, sqlx::Error> {
    let fence: i64 = row.try_get(2)?;
    let ttl_ms: i64 = row.try_get(3)?;
    let note: Option<Vec<u8>> = row.try_get(4)?;
    let queued: i64 = row.try_get(5)?;
    let holder = note.map(|note| {
        Holder::new(
            unsigned(fence),
            Some(Duration::from_millis(unsigned(ttl_ms))),
        )
        .with_note(note)
    });
    Ok(LockInfo {
        name: text(row.try_get(0)?),
        key: lock_mysql::TABLE.to_owned(),
        kind: if queued > 0 { "fair" } else { "mutex" },
        token: row.try_get::<Option<Vec<u8>>, _>(1)?.map(text),
        ttl_ms: Some(ttl_ms),
        fencing_token: Some(unsigned(fence)),
        queued: unsigned(queued),
        holder,
        node: node.to_owned(),
        ..LockInfo::default()
    })
}

fn read_write_lock(row: &MySqlRow, node: &str) -> Result<LockInfo, sqlx::Error> {
    let fence: i64 = row.try_get(3)?;
    let readers: i64 = row.try_get(4)?;
    let waiting: i64 = row.try_get(5)?;
    Ok(LockInfo {
        name: text(row.try_get(0)?),
        key: "distlock_rw".to_owned(),
        kind: "read-write",
        token: row.try_get::<Option<Vec<u8>>, _>(1)?.map(text),
        ttl_ms: row.try_get(2)?,
        fencing_token: Some(unsigned(fence)),
        queued: unsigned(waiting),
        readers: Some(Members {
            count: unsigned(readers),
            shown: Vec::new(),
        }),
        node: node.to_owned(),
        ..LockInfo::default()
    })
}

fn semaphore_lock(row: &MySqlRow, node: &str) -> Result<LockInfo, sqlx::Error> {
    let max: i32 = row.try_get(1)?;
    let used: i64 = row.try_get(2)?;
    let holders: i64 = row.try_get(3)?;
    Ok(LockInfo {
        name: text(row.try_get(0)?),
        key: "distlock_semaphores".to_owned(),
        kind: "semaphore",
        permits: Some(Permits {
            max: u64::try_from(max).ok(),
            used: Some(unsigned(used)),
            holders: Members {
                count: unsigned(holders),
                shown: Vec::new(),
            },
        }),
        node: node.to_owned(),
        ..LockInfo::default()
    })
}

/// Where `token` holds `name` now: the table it is in, and whether a fair queue waits.
fn holder_sql() -> String {
    let live = format!("expires_at > {NOW}");
    format!(
        "SELECT 'lease', EXISTS (SELECT 1 FROM distlock_fair_queue q
        WHERE q.name = ? AND q.lapses_at > {NOW})
    FROM distlock_leases WHERE name = ? AND token = ? AND {live}
UNION ALL SELECT 'writer', 0 FROM distlock_rw WHERE name = ? AND writer = ? AND {live}
UNION ALL SELECT 'reader', 0 FROM distlock_rw_readers WHERE name = ? AND token = ? AND {live}
UNION ALL SELECT 'permits', 0 FROM distlock_permits WHERE name = ? AND token = ? AND {live}"
    )
}

/// The lease `token` holds on `name` (of the kind its table says), for `release`; `None` when
/// the token holds nothing there.
pub(super) async fn lease_of(
    target: &MysqlTarget,
    name: &str,
    token: &str,
) -> Result<Option<Lease>, Failure> {
    let sql = holder_sql();
    let query = sqlx::query(&sql)
        .bind(name)
        .bind(name)
        .bind(token)
        .bind(name)
        .bind(token)
        .bind(name)
        .bind(token)
        .bind(name)
        .bind(token)
        .fetch_optional(target.lock.pool());
    let Some(row) = target.bounded("finding the token's lease", query).await? else {
        return Ok(None);
    };
    let table: String = row.try_get(0).map_err(|e| unexpected(target, &e))?;
    let queued: i64 = row.try_get(1).map_err(|e| unexpected(target, &e))?;
    let parsed: Token = token.parse().map_err(|_| {
        Failure::new(
            FAILURE,
            format!("{name:?} is held with {token:?}, which is not a distlock token"),
        )
    })?;
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
    let now = tokio::time::Instant::now();
    Ok(Some(Lease::new(name, parsed, 0, now).with_kind(kind)))
}

/// The `GET_LOCK` locks the server holds now (lock-mysql's advisory mode) whose name `filter`
/// covers: from MariaDB's `information_schema.METADATA_LOCK_INFO` (the `metadata_lock_info`
/// plugin: `plugin-load-add = metadata_lock_info`), else MySQL's
/// `performance_schema.metadata_locks`. Each is kind `advisory`, its holder the connection
/// that holds it; no token, TTL or fencing token (a session lock has none). None where neither
/// table can be read (the plugin not loaded, the schema off or not granted): the README says
/// so. A name over 64 characters is held under its hash (`lock_mysql::advisory_name`), shown
/// as such.
pub(super) async fn advisory(
    target: &MysqlTarget,
    filter: &Filter,
) -> Result<Vec<LockInfo>, Failure> {
    let value = match filter {
        Filter::Name(name) => lock_mysql::advisory_name(name),
        Filter::Like(_) => filter.value().to_owned(),
    };
    let sources = [
        format!(
            "SELECT CAST(TABLE_SCHEMA AS CHAR), CAST(THREAD_ID AS SIGNED) \
             FROM information_schema.METADATA_LOCK_INFO \
             WHERE LOCK_TYPE = 'User lock' AND {}",
            filter.on("TABLE_SCHEMA")
        ),
        format!(
            "SELECT CAST(OBJECT_NAME AS CHAR), CAST(OWNER_THREAD_ID AS SIGNED) \
             FROM performance_schema.metadata_locks \
             WHERE OBJECT_TYPE = 'USER LEVEL LOCK' AND LOCK_STATUS = 'GRANTED' AND {}",
            filter.on("OBJECT_NAME")
        ),
    ];
    for sql in sources {
        let query = sqlx::query_as::<_, (String, i64)>(&sql)
            .bind(value.clone())
            .fetch_all(target.lock.pool());
        // A table this server does not have, or does not let us read: try the next.
        let Ok(rows) = target.bounded("reading GET_LOCK locks", query).await else {
            continue;
        };
        return Ok(rows
            .into_iter()
            .map(|(name, thread)| LockInfo {
                key: name.clone(),
                name,
                kind: "advisory",
                holder: Some(
                    Holder::new(0, None).with_note(format!("connection {thread}").into_bytes()),
                ),
                node: target.node.clone(),
                ..LockInfo::default()
            })
            .collect());
    }
    Ok(Vec::new())
}
