//! [`Store`] on PostgreSQL: lock-postgres's lease table (every kind, read with one query per
//! kind: `postgres_read`) and the server's advisory locks (`pg_locks`: `postgres_advisory`);
//! released through lock-postgres's own release statements, used through a `PostgresLock` for
//! `run` and elections, and followed with `LISTEN` (`postgres_releases`). The server as
//! reached is `postgres_target`'s [`PostgresTarget`].

use std::sync::Arc;

use async_trait::async_trait;
use lock_core::backend::Lock;

use super::postgres_read::{self, Filter};
use super::postgres_target::PostgresTarget;
use super::{Releases, Session, Store, postgres_advisory};
use crate::cli::ScanArgs;
use crate::exit::{FAILURE, Failure, USAGE};
use crate::inspect::{Listing, LockInfo};

#[async_trait]
impl Store for PostgresTarget {
    fn backend(&self) -> &'static str {
        "postgres"
    }

    async fn scan(&self, pattern: &str, _scan: &ScanArgs) -> Result<Listing, Failure> {
        let matcher = glob::Pattern::new(pattern)
            .map_err(|e| Failure::new(USAGE, format!("bad pattern {pattern:?}: {e}")))?;
        let client = self.client().await?;
        // A pattern without wildcards is a name: read by the primary key, and its advisory key
        // is known.
        let literal = (!pattern.contains(['*', '?', '['])).then_some(pattern);
        let filter = match literal {
            Some(name) => Filter::Name(name.to_owned()),
            None => Filter::Like(postgres_read::like_prefix(pattern)),
        };
        let (mut locks, rows) = postgres_read::read(self, &client, &filter).await?;
        let advisory = postgres_advisory::list(self, &client, literal).await?;
        let rows = rows + advisory.len() as u64;
        locks.extend(advisory);
        locks.retain(|lock| matcher.matches(&lock.name));
        locks.sort_by(|a, b| (&a.name, a.kind).cmp(&(&b.name, b.kind)));
        Ok(Listing {
            locks,
            keys_scanned: rows,
            truncated: false,
        })
    }

    async fn read(&self, name: &str) -> Result<Vec<LockInfo>, Failure> {
        let client = self.client().await?;
        let (mut locks, _) =
            postgres_read::read(self, &client, &Filter::Name(name.to_owned())).await?;
        locks.extend(postgres_advisory::describe(self, &client, name).await?);
        locks.sort_by(|a, b| a.kind.cmp(b.kind));
        Ok(locks)
    }

    async fn release_token(&self, name: &str, token: &str) -> Result<bool, Failure> {
        let client = self.client().await?;
        if let Some(lease) = postgres_read::lease_of(self, &client, name, token).await? {
            drop(client);
            return Ok(self.lock.release(&lease).await?);
        }
        if let Some(session) = postgres_advisory::holding_session(self, &client, name).await? {
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

    async fn releases(&self) -> Result<Option<Box<dyn Releases>>, Failure> {
        Ok(Some(Box::new(
            super::postgres_releases::PostgresReleases::start(self).await?,
        )))
    }

    async fn holding_session(&self, name: &str) -> Result<Option<Session>, Failure> {
        let client = self.client().await?;
        postgres_advisory::holding_session(self, &client, name).await
    }

    async fn end_session(&self, name: &str, session: &Session) -> Result<bool, Failure> {
        let client = self.client().await?;
        postgres_advisory::terminate(self, &client, name, session).await
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
