//! [`Store`] on MySQL / MariaDB: lock-mysql's lease table (every kind, read with one query per
//! kind: `mysql_read`), released through lock-mysql's own release statements, used through a
//! `MysqlLock` for `run` and elections. MySQL announces no releases (`watch` shows none), and
//! `GET_LOCK` session locks (`MysqlAdvisoryLock`) are not listed: the server keeps no
//! portable table of them.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use lock_core::backend::Lock;
use lock_mysql::MysqlLock;

use super::Store;
use super::mysql_read::{self, Filter};
use crate::cli::{ScanArgs, TargetArgs};
use crate::exit::{BACKEND, Failure, USAGE, one_line};
use crate::inspect::{Listing, LockInfo};

/// A MySQL / MariaDB server as the command reaches it.
pub(crate) struct MysqlTarget {
    /// lock-mysql's lock: `run`, elections, releases; its pool serves the reads too.
    pub(super) lock: Arc<MysqlLock>,
    /// `host:port`, for `node` and messages; never the password.
    pub(crate) node: String,
    command_timeout: Duration,
}

impl MysqlTarget {
    /// Builds the lock-mysql lock on the one URL given and checks the server answers (and
    /// takes the credentials), so that every subcommand fails at once, in one line.
    ///
    /// # Errors
    /// A usage failure for several URLs or a URL lock-mysql refuses; a backend failure when
    /// the server cannot be reached or refuses the connection.
    pub(crate) async fn connect(args: &TargetArgs) -> Result<Self, Failure> {
        let [url] = args.url.as_slice() else {
            return Err(Failure::new(USAGE, "give one MySQL URL"));
        };
        let lock = MysqlLock::builder()
            .url(url.clone())
            .connect_timeout(args.connect_timeout)
            .statement_timeout(args.command_timeout)
            .build()?;
        let target = Self {
            lock: Arc::new(lock),
            node: node_of(url),
            command_timeout: args.command_timeout,
        };
        target.lock.ping().await.map_err(|e| {
            Failure::new(
                BACKEND,
                format!("MySQL at {}, connecting: {}", target.node, one_line(&e)),
            )
        })?;
        Ok(target)
    }

    /// Awaits `query` within the command timeout; `what` names it in a failure.
    ///
    /// # Errors
    /// A backend failure when it fails or takes longer.
    pub(super) async fn bounded<T>(
        &self,
        what: &str,
        query: impl std::future::Future<Output = Result<T, lock_mysql::sqlx::Error>>,
    ) -> Result<T, Failure> {
        match tokio::time::timeout(self.command_timeout, query).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(error)) => Err(Failure::new(
                BACKEND,
                format!("MySQL at {}, {what}: {}", self.node, one_line(&error)),
            )),
            Err(_) => Err(Failure::new(
                BACKEND,
                format!(
                    "MySQL at {}, {what}: no answer within {}",
                    self.node,
                    humantime::format_duration(self.command_timeout)
                ),
            )),
        }
    }
}

/// `host:port` of a `mysql://user:pw@host:port/db` URL, without the credentials.
fn node_of(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split(['/', '?']).next().unwrap_or_default();
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    if host.contains(':') {
        host.to_owned()
    } else {
        format!("{host}:3306")
    }
}

#[async_trait]
impl Store for MysqlTarget {
    fn backend(&self) -> &'static str {
        "mysql"
    }

    async fn scan(&self, pattern: &str, _scan: &ScanArgs) -> Result<Listing, Failure> {
        let matcher = glob::Pattern::new(pattern)
            .map_err(|e| Failure::new(USAGE, format!("bad pattern {pattern:?}: {e}")))?;
        let filter = if pattern.contains(['*', '?', '[']) {
            Filter::Like(super::postgres_read::like_prefix(pattern))
        } else {
            Filter::Name(pattern.to_owned())
        };
        let (mut locks, rows) = mysql_read::read(self, &filter).await?;
        locks.retain(|lock| matcher.matches(&lock.name));
        locks.sort_by(|a, b| (&a.name, a.kind).cmp(&(&b.name, b.kind)));
        Ok(Listing {
            locks,
            keys_scanned: rows,
            truncated: false,
        })
    }

    async fn read(&self, name: &str) -> Result<Vec<LockInfo>, Failure> {
        lock_core::check_name(name)?;
        let (mut locks, _) = mysql_read::read(self, &Filter::Name(name.to_owned())).await?;
        locks.sort_by(|a, b| a.kind.cmp(b.kind));
        Ok(locks)
    }

    async fn release_token(&self, name: &str, token: &str) -> Result<bool, Failure> {
        lock_core::check_name(name)?;
        match mysql_read::lease_of(self, name, token).await? {
            Some(lease) => Ok(self.lock.release(&lease).await?),
            None => Ok(false),
        }
    }

    fn lock(&self, _describe: Option<&str>) -> Result<Arc<dyn Lock>, Failure> {
        Ok(self.lock.clone())
    }

    async fn migrate(&self) -> Result<(String, serde_json::Value), Failure> {
        self.lock.migrate().await?;
        let version = lock_mysql::SCHEMA_VERSION;
        Ok((
            format!("MySQL: the distlock schema is at version {version}"),
            serde_json::json!({ "backend": "mysql", "schema_version": version }),
        ))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_node_leaves_the_credentials_out() {
        assert_eq!(super::node_of("mysql://u:pw@db:3307/app"), "db:3307");
        assert_eq!(
            super::node_of("mysql://db/app?ssl-mode=disabled"),
            "db:3306"
        );
    }
}
