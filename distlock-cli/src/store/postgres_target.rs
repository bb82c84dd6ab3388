//! A PostgreSQL server as the command reaches it ([`PostgresTarget`]): the URL parsed, the
//! `PostgresLock` built on it, one pooled connection for the reads, and one-line failures.
//! The lease table's reads (`postgres_read`), the advisory locks (`postgres_advisory`) and the
//! release counting (`postgres_releases`) use it; `postgres.rs` puts them together as a
//! [`Store`](super::Store).

use std::sync::Arc;
use std::time::Duration;

use lock_postgres::PostgresLock;
use lock_postgres::deadpool_postgres::{Object, PoolError};
use lock_postgres::tokio_postgres;

use crate::cli::TargetArgs;
use crate::exit::{BACKEND, Failure, USAGE, one_line};

/// A PostgreSQL server and the settings the subcommands need.
pub(crate) struct PostgresTarget {
    /// lock-postgres's lock: `run`, elections, releases; its pool serves the reads too.
    pub(super) lock: Arc<PostgresLock>,
    /// The client configuration of the URL, for `watch`'s listening connection.
    pub(super) config: tokio_postgres::Config,
    /// `host:port` (or the socket directory), for `node` and messages; never the password.
    pub(crate) node: String,
    pub(super) connect_timeout: Duration,
    pub(super) command_timeout: Duration,
}

impl PostgresTarget {
    /// Builds the lock-postgres lock on the one URL given, and connects its pool once, so
    /// that a server that is down or refuses the credentials fails every subcommand at once,
    /// in one line (`run` would otherwise retry for all of its --wait).
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
        let mut config = url
            .parse::<tokio_postgres::Config>()
            .map_err(|e| Failure::new(USAGE, format!("bad PostgreSQL URL: {}", one_line(&e))))?;
        config.connect_timeout(args.connect_timeout);
        if config.get_application_name().is_none() {
            config.application_name("distlock");
        }
        let target = Self {
            lock: Arc::new(lock),
            node: node_of(&config),
            config,
            connect_timeout: args.connect_timeout,
            command_timeout: args.command_timeout,
        };
        // Back to the pool for the subcommand's first statement.
        drop(target.client().await?);
        Ok(target)
    }

    /// A pooled connection of the lock's pool, within the connect timeout.
    ///
    /// # Errors
    /// A backend failure (the server down, a wrong password, too slow), in one line.
    pub(super) async fn client(&self) -> Result<Object, Failure> {
        match tokio::time::timeout(self.connect_timeout, self.lock.pool().get()).await {
            Ok(Ok(client)) => Ok(client),
            Ok(Err(PoolError::Backend(error))) => Err(self.failure("connecting", &error)),
            Ok(Err(other)) => Err(Failure::new(
                BACKEND,
                format!(
                    "PostgreSQL at {}, connecting: {}",
                    self.node,
                    one_line(&other)
                ),
            )),
            Err(_) => Err(Failure::new(
                BACKEND,
                format!(
                    "PostgreSQL at {}, connecting: no connection within {}",
                    self.node,
                    humantime::format_duration(self.connect_timeout)
                ),
            )),
        }
    }

    /// Awaits `query` within the command timeout; `what` names it in a failure.
    ///
    /// # Errors
    /// A backend failure when it fails or takes longer.
    pub(super) async fn bounded<T>(
        &self,
        what: &str,
        query: impl std::future::Future<Output = Result<T, tokio_postgres::Error>>,
    ) -> Result<T, Failure> {
        match tokio::time::timeout(self.command_timeout, query).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(error)) => Err(self.failure(what, &error)),
            Err(_) => Err(Failure::new(
                BACKEND,
                format!(
                    "PostgreSQL at {}, {what}: no answer within {}",
                    self.node,
                    humantime::format_duration(self.command_timeout)
                ),
            )),
        }
    }

    /// A backend failure of `what`, with the server's own message (and SQLSTATE) on one line.
    pub(super) fn failure(&self, what: &str, error: &tokio_postgres::Error) -> Failure {
        Failure::new(
            BACKEND,
            format!(
                "PostgreSQL at {}, {what}: {}",
                self.node,
                one_line(&describe(error))
            ),
        )
    }
}

/// A tokio-postgres error with the server's message and code, which its `Display` leaves out,
/// or the cause of a connection failure.
pub(super) fn describe(error: &tokio_postgres::Error) -> String {
    match error.as_db_error() {
        Some(db) => format!("{} ({}): {}", db.severity(), db.code().code(), db.message()),
        None => match std::error::Error::source(error) {
            Some(cause) => format!("{error}: {cause}"),
            None => error.to_string(),
        },
    }
}

/// `host:port` of the configuration's first host (a socket's directory for a Unix socket).
fn node_of(config: &tokio_postgres::Config) -> String {
    let host = match config.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(host)) => host.clone(),
        Some(tokio_postgres::config::Host::Unix(dir)) => dir.display().to_string(),
        None => "localhost".to_owned(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    format!("{host}:{port}")
}
