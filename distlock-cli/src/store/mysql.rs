//! [`Store`] on MySQL / MariaDB: lock-mysql's own inspector (the lease tables' every kind, and
//! the `GET_LOCK` session locks the server tells of), and its `MysqlLock` for `run` and
//! elections. MySQL announces no releases (`watch` shows none).

use std::sync::Arc;

use async_trait::async_trait;
use lock_core::backend::{Inspect, Lock};

use super::Store;
pub(crate) use super::mysql_target::MysqlTarget;
use crate::exit::Failure;

#[async_trait]
impl Store for MysqlTarget {
    fn backend(&self) -> &'static str {
        "mysql"
    }

    fn inspector(&self) -> Option<&dyn Inspect> {
        Some(self.lock.as_ref())
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
