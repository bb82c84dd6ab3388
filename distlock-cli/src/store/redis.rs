//! [`Store`] on one Redis or Valkey deployment (single, Cluster, Sentinel): a `RedisLock` built
//! from the URLs (`connect`), whose own operator reads list, show, release and count the
//! releases announced.

use std::sync::Arc;

use async_trait::async_trait;
use lock_core::backend::{Inspect, Lock};
use lock_redis::RedisLock;

use super::Store;
use crate::connect::Target;
use crate::exit::Failure;

#[async_trait]
impl Store for Target {
    fn backend(&self) -> &'static str {
        "redis"
    }

    fn inspector(&self) -> Option<&dyn Inspect> {
        Some(&self.lock)
    }

    fn lock(&self, describe: Option<&str>) -> Result<Arc<dyn Lock>, Failure> {
        let builder = match describe {
            Some(note) => RedisLock::builder().holder_note(note),
            None => RedisLock::builder(),
        };
        Ok(Arc::new(self.lock_with(builder)?))
    }

    fn describes_grants(&self) -> bool {
        true
    }

    async fn migrate(&self) -> Result<(String, serde_json::Value), Failure> {
        let load = self
            .lock_with(RedisLock::builder())?
            .fences()
            .load()
            .await?;
        Ok((
            format!("Redis: {load}"),
            serde_json::json!({
                "backend": "redis",
                "library": "distlock",
                "version": lock_redis::LIBRARY_VERSION,
                "functions": load.uses_functions(),
                "outcome": load.to_string(),
            }),
        ))
    }
}
