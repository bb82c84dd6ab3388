//! [`Store`] on PostgreSQL: lock-postgres's lease table and its advisory locks.

use std::sync::Arc;

use async_trait::async_trait;
use lock_core::backend::Lock;
use lock_postgres::PostgresLock;

use super::Store;
use crate::cli::{ScanArgs, TargetArgs};
use crate::exit::{FAILURE, Failure, USAGE};
use crate::inspect::{Listing, LockInfo};

/// A PostgreSQL server and the settings the subcommands need.
pub(crate) struct PostgresTarget {
    lock: Arc<PostgresLock>,
}

impl PostgresTarget {
    /// Builds the lock-postgres lock on the one URL given (it connects on first use).
    ///
    /// # Errors
    /// A usage failure for several URLs or a URL lock-postgres refuses.
    pub(crate) fn connect(args: &TargetArgs) -> Result<Self, Failure> {
        let [url] = args.url.as_slice() else {
            return Err(Failure::new(USAGE, "give one PostgreSQL URL"));
        };
        let lock = PostgresLock::builder()
            .url(url.clone())
            .connect_timeout(args.connect_timeout)
            .statement_timeout(args.command_timeout)
            .build()?;
        Ok(Self {
            lock: Arc::new(lock),
        })
    }
}

#[async_trait]
impl Store for PostgresTarget {
    fn backend(&self) -> &'static str {
        "postgres"
    }

    async fn scan(&self, _pattern: &str, _scan: &ScanArgs) -> Result<Listing, Failure> {
        Err(not_yet())
    }

    async fn read(&self, _name: &str) -> Result<Vec<LockInfo>, Failure> {
        Err(not_yet())
    }

    async fn release_token(&self, _name: &str, _token: &str) -> Result<bool, Failure> {
        Err(not_yet())
    }

    fn lock(&self, _describe: Option<&str>) -> Result<Arc<dyn Lock>, Failure> {
        Ok(self.lock.clone())
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

/// Reading PostgreSQL's locks is not written yet.
fn not_yet() -> Failure {
    Failure::new(FAILURE, "reading locks on PostgreSQL is not available yet")
}
