//! [`Store`] on MySQL / MariaDB: lock-mysql's lease table (every kind, read with one query per
//! kind: `mysql_read`), released through lock-mysql's own release statements, used through a
//! `MysqlLock` for `run` and elections. MySQL announces no releases (`watch` shows none), and
//! `GET_LOCK` session locks (`MysqlAdvisoryLock`) are not listed: the server keeps no
//! portable table of them.

use std::sync::Arc;

use async_trait::async_trait;
use lock_core::backend::Lock;

use super::Store;
use super::mysql_read::{self, Filter};
pub(crate) use super::mysql_target::MysqlTarget;
use crate::cli::ScanArgs;
use crate::exit::{Failure, USAGE};
use crate::inspect::{Listing, LockInfo};

#[async_trait]
impl Store for MysqlTarget {
    fn backend(&self) -> &'static str {
        "mysql"
    }

    async fn scan(&self, pattern: &str, _scan: &ScanArgs) -> Result<Listing, Failure> {
        let matcher = glob::Pattern::new(pattern)
            .map_err(|e| Failure::new(USAGE, format!("bad pattern {pattern:?}: {e}")))?;
        let filter = if pattern.contains(['*', '?', '[']) {
            Filter::Like(super::like::like_prefix(pattern))
        } else {
            Filter::Name(pattern.to_owned())
        };
        let (mut locks, rows) = mysql_read::read(self, &filter).await?;
        locks.extend(mysql_read::advisory(self, &filter).await?);
        locks.retain(|lock| matcher.matches(&lock.name));
        locks.sort_by(|a, b| (&a.name, a.kind).cmp(&(&b.name, b.kind)));
        Ok(Listing {
            locks,
            keys_scanned: rows,
            truncated: false,
        })
    }

    async fn read(&self, name: &str) -> Result<Vec<LockInfo>, Failure> {
        let filter = Filter::Name(name.to_owned());
        let (mut locks, _) = mysql_read::read(self, &filter).await?;
        locks.extend(mysql_read::advisory(self, &filter).await?);
        locks.sort_by(|a, b| a.kind.cmp(b.kind));
        Ok(locks)
    }

    async fn release_token(&self, name: &str, token: &str) -> Result<bool, Failure> {
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
            format!(
                "MySQL: the distlock schema is at version {version} (the lease tables, and the \
                 fence `CALL distlock_fence(resource, token)`)"
            ),
            serde_json::json!({ "backend": "mysql", "schema_version": version }),
        ))
    }
}
