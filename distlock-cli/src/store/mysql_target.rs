//! The MySQL / MariaDB server as the command reaches it (`MysqlTarget`): its lock-mysql lock
//! (whose inspector reads the server) and its `host:port`, checked to answer once.

use std::sync::Arc;

use lock_core::backend::Lock;
use lock_mysql::MysqlLock;

use crate::cli::TargetArgs;
use crate::exit::{BACKEND, Failure, USAGE, one_line};

/// A MySQL / MariaDB server as the command reaches it.
pub(crate) struct MysqlTarget {
    /// lock-mysql's lock: `run`, elections, and its inspector.
    pub(super) lock: Arc<MysqlLock>,
    /// `host:port`, for messages; never the password.
    node: String,
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
        };
        target.lock.ping().await.map_err(|e| {
            Failure::new(
                BACKEND,
                format!("MySQL at {}, connecting: {}", target.node, one_line(&e)),
            )
        })?;
        Ok(target)
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
