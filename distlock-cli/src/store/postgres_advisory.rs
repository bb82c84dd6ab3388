//! PostgreSQL's advisory locks, read from `pg_locks` (`locktype = 'advisory'`, this database)
//! with their sessions from `pg_stat_activity`, in one query.
//!
//! A lock name maps to a key as lock-postgres's advisory mode (and sqlx's `PgAdvisoryLock`)
//! maps it ([`lock_postgres::advisory_key`]); the server keeps only the key, so `show NAME`
//! computes it and looks for it, while `ls` names what it finds `advisory:<key>` (or
//! `advisory:<k1>,<k2>` for a lock taken with two `int4` keys). The lock belongs to the
//! session that took it: there is no token, and only that session unlocks it (or its end), so
//! `release --force` terminates the session's backend (`pg_terminate_backend`).
//!
//! Since when a lock is held, PostgreSQL does not record. The session's `backend_start` is
//! shown (`session_since_ms`): the lock is held at most since then. `xact_start` is empty for a
//! session lock held between transactions (lock-postgres's advisory mode holds it idle), and
//! `state_change` moves with every statement (its heartbeats), so neither dates the grant;
//! `state_change` is shown as the session's last activity.

use std::collections::BTreeMap;
use std::time::Duration;

use lock_core::backend::Holder;
use lock_postgres::tokio_postgres::types::{ToSql, Type};
use lock_postgres::tokio_postgres::{self, Client, Row};

use super::Session;
use super::postgres_target::PostgresTarget;
use crate::exit::{BACKEND, FAILURE, Failure};
use crate::inspect::LockInfo;

/// How a name given on the command line reads as an advisory lock.
const PREFIX: &str = "advisory:";

/// Every advisory lock of this database, granted or requested, with its session. `$1`: 0 for
/// all keys, else only the key `(classid, objid, objsubid) = ($2, $3, $4)`.
const LOCKS: &str = "\
SELECT l.classid::int8, l.objid::int8, l.objsubid::int4, l.mode, l.granted, l.pid,
    a.application_name, host(a.client_addr), a.usename::text,
    (extract(epoch FROM a.backend_start) * 1000)::int8, a.state,
    (extract(epoch FROM a.state_change) * 1000)::int8
FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'advisory'
    AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
    AND ($1 = 0 OR (l.classid::int8 = $2 AND l.objid::int8 = $3 AND l.objsubid::int4 = $4))
ORDER BY l.classid, l.objid, l.objsubid, l.granted DESC, l.pid";

/// An advisory lock's identity in `pg_locks`: one `bigint` key is `(high 32 bits, low 32
/// bits, 1)`; two `int4` keys are `(k1, k2, 2)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Key {
    classid: i64,
    objid: i64,
    objsubid: i32,
}

impl Key {
    /// The `bigint` key `key` (`pg_advisory_lock(bigint)`).
    fn big(key: i64) -> Self {
        // `as` splits the two's complement into its halves, as the server does.
        let bits = key as u64;
        Self {
            classid: (bits >> 32) as i64,
            objid: (bits & 0xffff_ffff) as i64,
            objsubid: 1,
        }
    }

    /// The key a name on the command line means: `advisory:<bigint>` or
    /// `advisory:<int4>,<int4>` as `ls` prints them, else the name's own key.
    fn of_name(name: &str) -> Self {
        if let Some(rest) = name.strip_prefix(PREFIX) {
            if let Ok(key) = rest.parse::<i64>() {
                return Self::big(key);
            }
            if let Some((a, b)) = rest.split_once(',')
                && let (Ok(a), Ok(b)) = (a.trim().parse::<i32>(), b.trim().parse::<i32>())
            {
                return Self {
                    classid: i64::from(a as u32),
                    objid: i64::from(b as u32),
                    objsubid: 2,
                };
            }
        }
        Self::big(lock_postgres::advisory_key(name))
    }

    /// How `ls` names it: `advisory:<bigint>` or `advisory:<int4>,<int4>`.
    // classid and objid are oids (32 bits): the casts take the bits back as the signed keys
    // they were given as, truncating nothing.
    #[allow(clippy::cast_possible_truncation)]
    fn text(self) -> String {
        if self.objsubid == 1 {
            let key = ((self.classid as u64) << 32 | (self.objid as u64 & 0xffff_ffff)) as i64;
            key.to_string()
        } else {
            format!(
                "{},{}",
                self.classid as u32 as i32, self.objid as u32 as i32
            )
        }
    }
}

/// One row of [`LOCKS`].
struct Entry {
    key: Key,
    mode: String,
    granted: bool,
    pid: Option<i32>,
    application: Option<String>,
    client: Option<String>,
    user: Option<String>,
    session_since_ms: Option<i64>,
    state: Option<String>,
    state_change_ms: Option<i64>,
}

impl Entry {
    fn from_row(row: &Row) -> Result<Self, tokio_postgres::Error> {
        Ok(Self {
            key: Key {
                classid: row.try_get(0)?,
                objid: row.try_get(1)?,
                objsubid: row.try_get(2)?,
            },
            mode: row.try_get(3)?,
            granted: row.try_get(4)?,
            pid: row.try_get(5)?,
            application: row.try_get(6)?,
            client: row.try_get(7)?,
            user: row.try_get(8)?,
            session_since_ms: row.try_get(9)?,
            state: row.try_get(10)?,
            state_change_ms: row.try_get(11)?,
        })
    }

    /// The holder's description: the JSON object `ls`/`show` print under `holder`.
    fn description(&self) -> serde_json::Value {
        let mut fields = serde_json::Map::new();
        let mut put = |name: &str, value: serde_json::Value| {
            if !value.is_null() {
                fields.insert(name.to_owned(), value);
            }
        };
        put("backend_pid", self.pid.into());
        put("application_name", self.application.clone().into());
        put("client_addr", self.client.clone().into());
        put("user", self.user.clone().into());
        put("session_since_ms", self.session_since_ms.into());
        put("state", self.state.clone().into());
        put("state_change_ms", self.state_change_ms.into());
        put("mode", self.mode.clone().into());
        serde_json::Value::Object(fields)
    }

    /// Who holds it, in words, for messages.
    fn about(&self) -> String {
        let mut parts = Vec::new();
        if let Some(app) = self.application.as_deref().filter(|a| !a.is_empty()) {
            parts.push(format!("application {app:?}"));
        }
        if let Some(client) = &self.client {
            parts.push(format!("client {client}"));
        }
        if let Some(user) = &self.user {
            parts.push(format!("user {user}"));
        }
        if let Some(since) = self.session_since_ms.and_then(|ms| u64::try_from(ms).ok()) {
            let at = std::time::UNIX_EPOCH + Duration::from_millis(since);
            parts.push(format!(
                "session since {}",
                humantime::format_rfc3339_seconds(at)
            ));
        }
        if parts.is_empty() {
            "no session details visible".to_owned()
        } else {
            parts.join(", ")
        }
    }
}

/// The advisory locks of `key` (every key with `None`), grouped by key.
async fn entries(
    target: &PostgresTarget,
    client: &Client,
    key: Option<Key>,
) -> Result<BTreeMap<Key, Vec<Entry>>, Failure> {
    let one = i32::from(key.is_some());
    let k = key.unwrap_or(Key {
        classid: 0,
        objid: 0,
        objsubid: 0,
    });
    let params: [(&(dyn ToSql + Sync), Type); 4] = [
        (&one, Type::INT4),
        (&k.classid, Type::INT8),
        (&k.objid, Type::INT8),
        (&k.objsubid, Type::INT4),
    ];
    let rows = target
        .bounded(
            "reading advisory locks (pg_locks)",
            client.query_typed(LOCKS, &params),
        )
        .await?;
    let mut grouped: BTreeMap<Key, Vec<Entry>> = BTreeMap::new();
    for row in &rows {
        let entry = Entry::from_row(row).map_err(|e| {
            Failure::new(
                FAILURE,
                format!(
                    "unexpected row from pg_locks: {}",
                    crate::exit::one_line(&e)
                ),
            )
        })?;
        grouped.entry(entry.key).or_default().push(entry);
    }
    Ok(grouped)
}

/// One lock per holding session of each key (a shared lock may have several), waiters being
/// the key's requests not granted. `name`: how to name the key (else `advisory:<key>`).
fn locks_of(
    target: &PostgresTarget,
    grouped: BTreeMap<Key, Vec<Entry>>,
    name: impl Fn(Key) -> String,
) -> Vec<LockInfo> {
    let mut locks = Vec::new();
    for (key, entries) in grouped {
        let waiters = entries.iter().filter(|e| !e.granted).count() as u64;
        for entry in entries.iter().filter(|e| e.granted) {
            let note = entry.description().to_string().into_bytes();
            locks.push(LockInfo {
                name: name(key),
                key: key.text(),
                kind: if entry.mode == "ExclusiveLock" {
                    "advisory"
                } else {
                    "advisory-shared"
                },
                waiters,
                holder: Some(Holder::new(0, None).with_note(note)),
                node: target.node.clone(),
                ..LockInfo::default()
            });
        }
    }
    locks
}

/// Every held advisory lock of the database, named `advisory:<key>`; `literal` (a name, from
/// a pattern without wildcards) names its own key.
///
/// # Errors
/// A backend failure when the query fails or is slow.
pub(super) async fn list(
    target: &PostgresTarget,
    client: &Client,
    literal: Option<&str>,
) -> Result<Vec<LockInfo>, Failure> {
    let grouped = entries(target, client, None).await?;
    let known = literal.map(|name| (name, Key::of_name(name)));
    Ok(locks_of(target, grouped, |key| match known {
        Some((name, k)) if k == key => name.to_owned(),
        _ => format!("{PREFIX}{}", key.text()),
    }))
}

/// The advisory locks of `name`'s key (see [`Key::of_name`]), named `name`.
///
/// # Errors
/// A backend failure when the query fails or is slow.
pub(super) async fn describe(
    target: &PostgresTarget,
    client: &Client,
    name: &str,
) -> Result<Vec<LockInfo>, Failure> {
    let grouped = entries(target, client, Some(Key::of_name(name))).await?;
    Ok(locks_of(target, grouped, |_| name.to_owned()))
}

/// The session holding `name`'s advisory lock, if one does; a failure when several share it
/// (which one to end is the operator's choice, with `pg_terminate_backend` by hand).
///
/// # Errors
/// A backend failure when the query fails or is slow; a failure when several sessions hold it.
pub(super) async fn holding_session(
    target: &PostgresTarget,
    client: &Client,
    name: &str,
) -> Result<Option<Session>, Failure> {
    let grouped = entries(target, client, Some(Key::of_name(name))).await?;
    let holders: Vec<&Entry> = grouped
        .values()
        .flatten()
        .filter(|e| e.granted && e.pid.is_some())
        .collect();
    match holders.as_slice() {
        [] => Ok(None),
        [one] => Ok(Some(Session {
            pid: one.pid.unwrap_or_default(),
            about: one.about(),
        })),
        many => Err(Failure::new(
            FAILURE,
            format!(
                "{name:?} is an advisory lock shared by {} sessions (backend pids {}): end the \
                 one you mean with pg_terminate_backend(pid)",
                many.len(),
                many.iter()
                    .filter_map(|e| e.pid.map(|p| p.to_string()))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )),
    }
}

/// Terminates `session`'s backend if it still holds `name`'s advisory lock (the same pid on
/// the same key, in the same statement, so a pid reused since is never hit), then waits
/// (within the command timeout) for the server to free the lock. Whether it is free.
const TERMINATE: &str = "\
SELECT pg_terminate_backend(l.pid) FROM pg_locks l
WHERE l.locktype = 'advisory' AND l.granted AND l.pid = $1
    AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
    AND l.classid::int8 = $2 AND l.objid::int8 = $3 AND l.objsubid::int4 = $4
LIMIT 1";

/// `release --force` on an advisory lock: [`TERMINATE`], then polls `pg_locks` (every 50 ms,
/// within the command timeout) until no session holds the key.
///
/// # Errors
/// A backend failure when the server refuses (no right to signal that backend: superuser,
/// `pg_signal_backend`, or the same role is needed) or is slow.
pub(super) async fn terminate(
    target: &PostgresTarget,
    client: &Client,
    name: &str,
    session: &Session,
) -> Result<bool, Failure> {
    let key = Key::of_name(name);
    let params: [(&(dyn ToSql + Sync), Type); 4] = [
        (&session.pid, Type::INT4),
        (&key.classid, Type::INT8),
        (&key.objid, Type::INT8),
        (&key.objsubid, Type::INT4),
    ];
    let rows = target
        .bounded(
            &format!("terminating backend pid {}", session.pid),
            client.query_typed(TERMINATE, &params),
        )
        .await?;
    if rows.first().and_then(|r| r.try_get::<_, bool>(0).ok()) == Some(false) {
        return Err(Failure::new(
            BACKEND,
            format!(
                "PostgreSQL did not terminate backend pid {} (it may have ended already)",
                session.pid
            ),
        ));
    }
    let started = tokio::time::Instant::now();
    // Bounded by the command timeout: the backend exits at its next interrupt check.
    loop {
        let held = entries(target, client, Some(key)).await?;
        if !held.values().flatten().any(|e| e.granted) {
            return Ok(true);
        }
        if started.elapsed() >= target.command_timeout {
            return Ok(false);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::Key;

    #[test]
    fn keys_split_and_join_as_the_server_does() {
        for key in [0, 1, -1, i64::MIN, i64::MAX, -5_560_419_505_042_474_287] {
            let split = Key::big(key);
            assert!(split.classid >= 0 && split.classid <= i64::from(u32::MAX));
            assert_eq!(split.text(), key.to_string());
            assert_eq!(Key::of_name(&format!("advisory:{key}")), split);
        }
        // pg_advisory_lock(1, 2) and (-1, 7): classid and objid as oids.
        let pair = Key::of_name("advisory:-1,7");
        assert_eq!(
            (pair.classid, pair.objid, pair.objsubid),
            (4_294_967_295, 7, 2)
        );
        assert_eq!(pair.text(), "-1,7");
        assert_eq!(
            Key::of_name("my first Postgres advisory lock!"),
            Key::big(-5_560_419_505_042_474_287)
        );
    }
}
