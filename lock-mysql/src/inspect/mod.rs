//! Operator reads (lock-core's [`Inspect`]): what `distlock ls`, `show` and `release --token`
//! read of a MySQL / MariaDB server, beside the layout they read. Both lock types read the
//! same things: the lease tables' holders of every kind (`holders.rs`, one statement) and the
//! `GET_LOCK` session locks the server tells of (`get_lock.rs`); a release by token is the
//! holder's own release of the kind its table says (`release.rs`). MySQL announces no
//! releases: there is no release feed.

mod get_lock;
mod holders;
mod release;

use std::collections::HashMap;

use async_trait::async_trait;
use lock_core::LockError;
use lock_core::backend::{HeldKind, HeldLock, Inspect, ListOptions, Listing, NamePattern};
use sqlx::mysql::MySqlPool;

use crate::advisory::MysqlAdvisoryLock;
use crate::error::no_such_table;
use crate::executor::Executor;
use crate::mysql_lock::MysqlLock;

/// Which names a read covers: those `LIKE` a pattern's literal prefix (a listing, matched
/// against the glob afterwards), or one name.
#[derive(Debug, Clone)]
pub(crate) enum Filter {
    /// The escaped `LIKE` pattern (escape character `!`).
    Like(String),
    /// One name.
    Name(String),
}

impl Filter {
    /// The narrowest filter covering every name `pattern` matches.
    fn of(pattern: &NamePattern) -> Self {
        let prefix = pattern.literal_prefix();
        if prefix == pattern.as_str() {
            Self::Name(prefix.to_owned())
        } else {
            Self::Like(like_prefix(prefix))
        }
    }

    /// The condition on a column, after the column's name: `= ?` or `LIKE ? ESCAPE '!'`
    /// (an escape of our own: the default backslash is off under `NO_BACKSLASH_ESCAPES`).
    pub(crate) fn condition(&self) -> &'static str {
        match self {
            Self::Like(_) => "LIKE ? ESCAPE '!'",
            Self::Name(_) => "= ?",
        }
    }

    /// The value bound to the condition.
    pub(crate) fn value(&self) -> &str {
        match self {
            Self::Like(v) | Self::Name(v) => v,
        }
    }
}

/// `LIKE` text matching every string that starts with `prefix`: its `%`, `_` and `!` escaped
/// with `!`, then `%`.
fn like_prefix(prefix: &str) -> String {
    let mut like = String::with_capacity(prefix.len() + 1);
    for c in prefix.chars() {
        if matches!(c, '%' | '_' | '!') {
            like.push('!');
        }
        like.push(c);
    }
    like.push('%');
    like
}

/// The server as listings name it: `host:port` (never the credentials), or the socket's path.
fn node(pool: &MySqlPool) -> String {
    let options = pool.connect_options();
    if let Some(socket) = options.get_socket() {
        return socket.display().to_string();
    }
    let host = options.get_host();
    if host.contains(':') {
        format!("[{host}]:{}", options.get_port())
    } else {
        format!("{host}:{}", options.get_port())
    }
}

/// Whether the lease tables must exist: a [`MysqlLock`]'s reads fail without them (they say to
/// migrate), a [`MysqlAdvisoryLock`]'s read no lease where nothing was migrated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tables {
    Required,
    IfPresent,
}

/// Every hold `filter` covers on the server of `exec`: the lease tables' and `GET_LOCK`'s, and
/// how many rows were read.
async fn read_all(
    exec: &Executor,
    filter: &Filter,
    tables: Tables,
) -> Result<(Vec<HeldLock>, u64), LockError> {
    let node = node(&exec.pool);
    let leases = match holders::read(exec, filter, &node).await {
        Err(error) if tables == Tables::IfPresent && no_such_table(&error) => (Vec::new(), 0),
        other => other?,
    };
    let (mut locks, mut rows) = leases;
    let sessions = get_lock::read(exec, filter, &node).await;
    rows += sessions.len() as u64;
    locks.extend(sessions);
    Ok((locks, rows))
}

/// Every hold whose name matches `pattern`; a `GET_LOCK` name in `own` (a hashed long name
/// the lock holds itself) is shown under the name it hides.
async fn list(
    exec: &Executor,
    pattern: &NamePattern,
    tables: Tables,
    own: &HashMap<String, String>,
) -> Result<Listing, LockError> {
    let (mut locks, rows) = read_all(exec, &Filter::of(pattern), tables).await?;
    for lock in &mut locks {
        if lock.kind == HeldKind::Session
            && let Some(name) = own.get(&lock.key)
        {
            lock.name.clone_from(name);
        }
    }
    locks.retain(|lock| pattern.matches(&lock.name));
    Ok(Listing::new(locks, rows))
}

async fn read(exec: &Executor, name: &str, tables: Tables) -> Result<Vec<HeldLock>, LockError> {
    let (mut locks, _) = read_all(exec, &Filter::Name(name.to_owned()), tables).await?;
    for lock in &mut locks {
        // A `GET_LOCK` of a long name is held under its hash: shown under the name asked.
        lock.name = name.to_owned();
    }
    Ok(Listing::new(locks, 0).locks)
}

/// Reads every kind of the lease tables (mutex, fair lock with its queue, read-write lock,
/// semaphore, each holder with its token, TTL left, fencing token, note and time of grant),
/// and the `GET_LOCK` locks the server tells of ([`HeldKind::Session`], token = the
/// connection id: MariaDB's `information_schema.METADATA_LOCK_INFO` with the
/// `metadata_lock_info` plugin, else MySQL's `performance_schema.metadata_locks`; none where
/// neither can be read). A release by token releases a lease-table holder as its own release
/// would; a `GET_LOCK` lock is released only with its session.
///
/// [`HeldKind::Session`]: lock_core::backend::HeldKind::Session
#[async_trait]
impl Inspect for MysqlLock {
    async fn list(
        &self,
        pattern: &NamePattern,
        _options: &ListOptions,
    ) -> Result<Listing, LockError> {
        list(self.exec(), pattern, Tables::Required, &HashMap::new()).await
    }

    async fn read(&self, name: &str) -> Result<Vec<HeldLock>, LockError> {
        read(self.exec(), name, Tables::Required).await
    }

    async fn release_held(&self, name: &str, token: &str) -> Result<bool, LockError> {
        release::release(self.exec(), name, token).await
    }
}

/// As [`MysqlLock`]'s: the `GET_LOCK` locks the server tells of, and the lease tables' holders
/// where the schema was migrated (none where it was not). A name over 64 characters is held
/// under its hash ([`advisory_name`](crate::advisory_name)): a listing shows the ones this lock
/// holds under their names, the others' under the hash.
#[async_trait]
impl Inspect for MysqlAdvisoryLock {
    async fn list(
        &self,
        pattern: &NamePattern,
        _options: &ListOptions,
    ) -> Result<Listing, LockError> {
        list(self.exec(), pattern, Tables::IfPresent, &self.held_names()).await
    }

    async fn read(&self, name: &str) -> Result<Vec<HeldLock>, LockError> {
        read(self.exec(), name, Tables::IfPresent).await
    }

    async fn release_held(&self, name: &str, token: &str) -> Result<bool, LockError> {
        match release::release(self.exec(), name, token).await {
            Err(error) if no_such_table(&error) => Ok(false),
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pattern_becomes_the_narrowest_filter() {
        let like = |p: &str| Filter::of(&NamePattern::new(p).expect("glob"));
        assert!(matches!(like("orders:1"), Filter::Name(n) if n == "orders:1"));
        assert!(matches!(like("a_b%c!*"), Filter::Like(l) if l == "a!_b!%c!!%"));
        assert!(matches!(like("*"), Filter::Like(l) if l == "%"));
    }
}
