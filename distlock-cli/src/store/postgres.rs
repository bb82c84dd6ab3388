//! [`Store`] on PostgreSQL: lock-postgres's `PostgresLock` and its inspector, which reads the
//! lease table (every kind) and the database's advisory locks, releases by token through the
//! kinds' own releases, and counts announced releases for `watch`. What is left here is the
//! command's own: the one URL, a first connection that fails in one line, the words of the
//! output as they were (`advisory-shared`, no token column for a session's lock), and the
//! messages of `release` on an advisory lock (`release --force` ends its session through
//! lock-postgres).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use lock_core::backend::{Inspect, ListOptions, Lock, NamePattern};
use lock_postgres::deadpool_postgres::PoolError;
use lock_postgres::{AdvisorySession, PostgresLock, tokio_postgres};

use super::{Session, Store};
use crate::cli::{ScanArgs, TargetArgs};
use crate::exit::{BACKEND, FAILURE, Failure, USAGE, one_line};
use crate::inspect::{Listing, LockInfo, description};

/// A PostgreSQL server as the command reaches it.
pub(crate) struct PostgresTarget {
    /// lock-postgres's lock: `run`, elections, and the operator reads (its inspector).
    lock: Arc<PostgresLock>,
    /// `host:port` (or the socket directory), for messages; never the password.
    node: String,
}

impl PostgresTarget {
    /// Builds the lock-postgres lock on the one URL given, and takes one connection of its
    /// pool, so that a server that is down or refuses the credentials fails every subcommand at
    /// once, in one line (`run` would otherwise retry for all of its --wait).
    ///
    /// # Errors
    /// A usage failure for several URLs or a URL lock-postgres refuses; a backend failure when
    /// the server cannot be reached or refuses the connection.
    pub(crate) async fn connect(args: &TargetArgs) -> Result<Self, Failure> {
        let [url] = args.url.as_slice() else {
            return Err(Failure::new(USAGE, "give one PostgreSQL URL"));
        };
        let lock = PostgresLock::builder()
            .url(url.clone())
            .connect_timeout(args.connect_timeout)
            .statement_timeout(args.command_timeout)
            .build()?;
        let target = Self {
            node: lock.node().to_owned(),
            lock: Arc::new(lock),
        };
        target.check(args.connect_timeout).await?;
        Ok(target)
    }

    /// Takes a pooled connection within `limit` and gives it back: the server answers.
    async fn check(&self, limit: Duration) -> Result<(), Failure> {
        let failure = |cause: String| {
            Failure::new(
                BACKEND,
                format!(
                    "PostgreSQL at {}, connecting: {}",
                    self.node,
                    one_line(&cause)
                ),
            )
        };
        match tokio::time::timeout(limit, self.lock.pool().get()).await {
            Ok(Ok(_client)) => Ok(()),
            Ok(Err(PoolError::Backend(error))) => Err(failure(describe(&error))),
            Ok(Err(other)) => Err(failure(other.to_string())),
            Err(_) => Err(failure(format!(
                "no connection within {}",
                humantime::format_duration(limit)
            ))),
        }
    }
}

/// A tokio-postgres error with the server's message and code, which its `Display` leaves out,
/// or the cause of a connection failure.
fn describe(error: &tokio_postgres::Error) -> String {
    match error.as_db_error() {
        Some(db) => format!("{} ({}): {}", db.severity(), db.code().code(), db.message()),
        None => match std::error::Error::source(error) {
            Some(cause) => format!("{error}: {cause}"),
            None => error.to_string(),
        },
    }
}

/// An advisory lock as the command has always shown it: its kind `advisory-shared` when its
/// session holds it shared (the `mode` of lock-postgres's description of the session), and no
/// token (the session's pid is in its description: `backend pid …`).
fn as_shown(lock: &mut LockInfo) {
    if lock.kind != "advisory" {
        return;
    }
    lock.token = None;
    let shared = lock
        .holder
        .as_ref()
        .is_some_and(|h| description(h).get("mode").and_then(|m| m.as_str()) == Some("ShareLock"));
    if shared {
        lock.kind = "advisory-shared";
    }
}

/// Who holds an advisory lock, in words, for messages: application, client, user, since when.
fn about(session: &AdvisorySession) -> String {
    let mut parts = Vec::new();
    if let Some(app) = &session.application_name {
        parts.push(format!("application {app:?}"));
    }
    if let Some(client) = &session.client_addr {
        parts.push(format!("client {client}"));
    }
    if let Some(user) = &session.user {
        parts.push(format!("user {user}"));
    }
    if let Some(at) = session.session_since {
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

#[async_trait]
impl Store for PostgresTarget {
    fn backend(&self) -> &'static str {
        "postgres"
    }

    fn inspector(&self) -> Option<&dyn Inspect> {
        Some(&*self.lock)
    }

    async fn scan(&self, pattern: &str, scan: &ScanArgs) -> Result<Listing, Failure> {
        let pattern = NamePattern::new(pattern)?;
        let options = ListOptions::default()
            .batch(scan.count)
            .foreign(scan.foreign);
        let mut listing = Listing::from_held(self.lock.list(&pattern, &options).await?);
        listing.locks.iter_mut().for_each(as_shown);
        Ok(listing)
    }

    async fn read(&self, name: &str) -> Result<Vec<LockInfo>, Failure> {
        let held = self.lock.inspect(name).await?;
        let mut locks: Vec<LockInfo> = held.into_iter().map(LockInfo::from_held).collect();
        locks.iter_mut().for_each(as_shown);
        Ok(locks)
    }

    /// Through the inspector; when no lease has the token but a session holds the name's
    /// advisory lock, a failure saying so (it has no token, only its session frees it).
    async fn release_token(&self, name: &str, token: &str) -> Result<bool, Failure> {
        if self.lock.release_token(name, token).await? {
            return Ok(true);
        }
        if let Some(session) = self.holding_session(name).await? {
            return Err(Failure::new(
                FAILURE,
                format!(
                    "not released: {name:?} is a session advisory lock of backend pid {} ({}): \
                     it has no token to compare, and only its own session can unlock it; it is \
                     freed when that session unlocks or ends (`distlock release {name} --force` \
                     terminates the backend)",
                    session.pid, session.about
                ),
            ));
        }
        Ok(false)
    }

    fn lock(&self, _describe: Option<&str>) -> Result<Arc<dyn Lock>, Failure> {
        Ok(self.lock.clone())
    }

    /// The one session holding `name`'s advisory lock; a failure when several share it (which
    /// one to end is the operator's choice, with `pg_terminate_backend` by hand).
    async fn holding_session(&self, name: &str) -> Result<Option<Session>, Failure> {
        let holders = self.lock.advisory_holders(name).await?;
        match holders.as_slice() {
            [] => Ok(None),
            [one] => Ok(Some(Session {
                pid: one.pid,
                about: about(one),
            })),
            many => Err(Failure::new(
                FAILURE,
                format!(
                    "{name:?} is an advisory lock shared by {} sessions (backend pids {}): end \
                     the one you mean with pg_terminate_backend(pid)",
                    many.len(),
                    many.iter()
                        .map(|s| s.pid.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )),
        }
    }

    async fn end_session(&self, name: &str, session: &Session) -> Result<bool, Failure> {
        Ok(self.lock.end_advisory_session(name, session.pid).await?)
    }

    async fn migrate(&self) -> Result<(String, serde_json::Value), Failure> {
        self.lock.migrate().await?;
        let version = lock_postgres::SCHEMA_VERSION;
        Ok((
            format!("PostgreSQL: the distlock schema is at version {version}"),
            serde_json::json!({ "backend": "postgres", "schema_version": version }),
        ))
    }
}
