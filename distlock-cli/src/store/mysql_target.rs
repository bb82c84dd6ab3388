//! The MySQL / MariaDB server as the command reaches it (`MysqlTarget`): its lock-mysql lock
//! and its `host:port`. Apart from the `Store` implementation (`mysql.rs`) so that the table's
//! reads (`mysql_read.rs`) take it without importing the store.

use std::sync::Arc;
use std::time::Duration;

use lock_core::backend::Lock;
use lock_mysql::MysqlLock;

use crate::cli::TargetArgs;
use crate::exit::{BACKEND, Failure, USAGE, one_line};

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
