//! PostgreSQL's advisory locks for the operator reads, read from `pg_locks` (`locktype =
//! 'advisory'`, this database) with their sessions from `pg_stat_activity`, in one query; and
//! what `distlock release --force` needs of them (the holding session, `pg_terminate_backend`).
//!
//! A lock name maps to a key as [`advisory_key`](crate::advisory_key) maps it (the advisory
//! mode's, and sqlx's); the server keeps only the key, so reading a name computes its key and
//! looks for it, while a
//! listing names what it finds `advisory:<key>` (or `advisory:<k1>,<k2>` for a lock taken with
//! two `int4` keys). The lock belongs to the session that took it: there is no token, and only
//! that session unlocks it (or its end).
//!
//! Since when a lock is held, PostgreSQL does not record. The session's `backend_start` is given
//! in the holder's description (`session_since_ms`): the lock is held at most since then.
//! `xact_start` is empty for a session lock held between transactions (the advisory mode holds
//! it idle), and `state_change` moves with every statement (its heartbeats), so neither dates the
//! grant; `state_change` is given as the session's last activity.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use lock_core::backend::{HeldKind, HeldLock, HolderView};
use lock_core::{LockError, Op};
use tokio_postgres::Row;
use tokio_postgres::types::{ToSql, Type};

use super::AdvisorySession;
use super::lock_key::{Key, PREFIX};
use crate::error::{BACKEND, unexpected};
use crate::executor::Executor;

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

/// Terminates the backend `$1` if it still holds the advisory lock `($2, $3, $4)` (the same
/// pid on the same key, in the same statement, so a pid reused since is never hit).
const TERMINATE: &str = "\
SELECT pg_terminate_backend(l.pid) FROM pg_locks l
WHERE l.locktype = 'advisory' AND l.granted AND l.pid = $1
    AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
    AND l.classid::int8 = $2 AND l.objid::int8 = $3 AND l.objsubid::int4 = $4
LIMIT 1";

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

    /// The holder's description, a JSON object (the holder's note): `backend_pid`,
    /// `application_name`, `client_addr`, `user`, `session_since_ms`, `state`,
    /// `state_change_ms`, `mode` (`ExclusiveLock` or `ShareLock`), each where known.
    fn description(&self) -> Vec<u8> {
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
        serde_json::Value::Object(fields).to_string().into_bytes()
    }

    /// The session, as [`AdvisorySession`].
    fn session(&self) -> AdvisorySession {
        let at = |ms: Option<i64>| -> Option<SystemTime> {
            Some(UNIX_EPOCH + Duration::from_millis(u64::try_from(ms?).ok()?))
        };
        AdvisorySession {
            pid: self.pid.unwrap_or_default(),
            application_name: self.application.clone().filter(|a| !a.is_empty()),
            client_addr: self.client.clone(),
            user: self.user.clone(),
            session_since: at(self.session_since_ms),
            shared: self.mode != "ExclusiveLock",
        }
    }
}

/// The advisory locks of `key` (every key with `None`), grouped by key.
async fn entries(
    exec: &Executor,
    key: Option<Key>,
) -> Result<BTreeMap<Key, Vec<Entry>>, LockError> {
    let one = i32::from(key.is_some());
    let k = key.unwrap_or(Key {
        classid: 0,
        objid: 0,
        objsubid: 0,
    });
    let [classid, objid, objsubid] = k.params();
    let params: [(&(dyn ToSql + Sync), Type); 4] = [(&one, Type::INT4), classid, objid, objsubid];
    let rows = exec.query(Op::Read, LOCKS, &params).await?;
    let mut grouped: BTreeMap<Key, Vec<Entry>> = BTreeMap::new();
    for row in &rows {
        let entry = Entry::from_row(row).map_err(|e| unexpected(Op::Read, e))?;
        grouped.entry(entry.key).or_default().push(entry);
    }
    Ok(grouped)
}

/// The leases of the inspecting lock itself, by the backend pid of the session holding each:
/// its name and token (hex).
pub(super) type Own = HashMap<i32, (String, String)>;

/// One lock per holding session of each key (a shared lock may have several), waiters being
/// the key's requests not granted. `name`: how to name the key; `own`: the inspecting lock's
/// own sessions, whose locks are named by their lease's name and hold its token after the pid.
fn held_locks(
    grouped: BTreeMap<Key, Vec<Entry>>,
    node: &str,
    name: impl Fn(Key) -> String,
    own: &Own,
) -> Vec<HeldLock> {
    let mut locks = Vec::new();
    for (key, entries) in grouped {
        let waiters = entries.iter().filter(|e| !e.granted).count() as u64;
        for entry in entries.iter().filter(|e| e.granted) {
            let mine = entry.pid.and_then(|pid| own.get(&pid));
            let (lock_name, token) = match (mine, entry.pid) {
                (Some((name, token)), Some(pid)) => (name.clone(), format!("{pid}:{token}")),
                (_, Some(pid)) => (name(key), pid.to_string()),
                _ => (name(key), String::new()),
            };
            let view = HolderView::new(token).note(entry.description());
            let mut lock =
                HeldLock::new(lock_name, key.text(), HeldKind::Session, node).holder(view);
            lock.waiters = waiters;
            locks.push(lock);
        }
    }
    locks
}

/// Every held advisory lock of the database, named `advisory:<key>`; `literal` (a name, from
/// a pattern without wildcards) names its own key. With the number of `pg_locks` rows read.
///
/// # Errors
/// [`LockError::Timeout`] / [`LockError::Backend`] when the query fails or is slow.
pub(super) async fn list(
    exec: &Executor,
    node: &str,
    literal: Option<&str>,
    own: &Own,
) -> Result<(Vec<HeldLock>, u64), LockError> {
    let grouped = entries(exec, None).await?;
    let rows = grouped.values().map(Vec::len).sum::<usize>() as u64;
    let known = literal.map(|name| (name, Key::of_name(name)));
    let locks = held_locks(
        grouped,
        node,
        |key| match known {
            Some((name, k)) if k == key => name.to_owned(),
            _ => format!("{PREFIX}{}", key.text()),
        },
        own,
    );
    Ok((locks, rows))
}

/// The advisory locks of `name`'s key (see [`Key::of_name`]), named `name`.
///
/// # Errors
/// [`LockError::Timeout`] / [`LockError::Backend`] when the query fails or is slow.
pub(super) async fn describe(
    exec: &Executor,
    node: &str,
    name: &str,
    own: &Own,
) -> Result<Vec<HeldLock>, LockError> {
    let grouped = entries(exec, Some(Key::of_name(name))).await?;
    Ok(held_locks(grouped, node, |_| name.to_owned(), own))
}

/// The sessions holding `name`'s advisory lock (several for a shared one), oldest key first.
///
/// # Errors
/// [`LockError::Timeout`] / [`LockError::Backend`] when the query fails or is slow.
pub(super) async fn holders(
    exec: &Executor,
    name: &str,
) -> Result<Vec<AdvisorySession>, LockError> {
    let grouped = entries(exec, Some(Key::of_name(name))).await?;
    Ok(grouped
        .values()
        .flatten()
        .filter(|e| e.granted && e.pid.is_some())
        .map(Entry::session)
        .collect())
}

/// [`TERMINATE`], then polls `pg_locks` (every 50 ms, within the statement timeout) until no
/// session holds the key: whether it is free.
///
/// # Errors
/// [`LockError::Backend`] when the server refuses (no right to signal that backend) or did not
/// terminate it (it ended already); [`LockError::Timeout`] when it is slow.
pub(super) async fn terminate(exec: &Executor, name: &str, pid: i32) -> Result<bool, LockError> {
    let key = Key::of_name(name);
    let [classid, objid, objsubid] = key.params();
    let params: [(&(dyn ToSql + Sync), Type); 4] = [(&pid, Type::INT4), classid, objid, objsubid];
    let rows = exec.query(Op::Release, TERMINATE, &params).await?;
    if rows.first().and_then(|r| r.try_get::<_, bool>(0).ok()) == Some(false) {
        return Err(LockError::Backend {
            backend: BACKEND,
            op: Op::Release,
            retryable: false,
            source: format!(
                "PostgreSQL did not terminate backend pid {pid} (it may have ended already)"
            )
            .into(),
        });
    }
    let started = tokio::time::Instant::now();
    // Bounded by the statement timeout: the backend exits at its next interrupt check.
    loop {
        let held = entries(exec, Some(key)).await?;
        if !held.values().flatten().any(|e| e.granted) {
            return Ok(true);
        }
        if started.elapsed() >= exec.statement_timeout {
            return Ok(false);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
