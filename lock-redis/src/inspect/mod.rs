//! Operator reads on Redis (lock-core's [`Inspect`]): `distlock ls`, `show`, `release
//! --token`, `watch` and the console of `distlock serve` read the layout here, beside the
//! code that writes it.
//!
//! A listing walks every master (`masters.rs`: the one server, or each master of a Redis
//! Cluster, routed by address over the lock's own connection) with `SCAN`, folds each key to
//! the lock it belongs to, and reads the locks it found in pipelined batches of plain read
//! commands (`read.rs`), decoded in `decode.rs`. A release by token is the holder's own
//! release of the mutex key, compare and delete (announced to waiters). `feed.rs` counts the
//! releases announced, for a watcher.

mod decode;
mod feed;
mod masters;
mod read;

use async_trait::async_trait;
use lock_core::LockError;
use lock_core::backend::{HeldLock, Inspect, ListOptions, Listing, NamePattern, ReleaseFeed};

use crate::RedisLock;

#[async_trait]
impl Inspect for RedisLock {
    async fn list(
        &self,
        pattern: &NamePattern,
        options: &ListOptions,
    ) -> Result<Listing, LockError> {
        let exec = self.executor();
        let masters = masters::masters(exec).await?;
        read::list(exec, &masters, self.prefix(), pattern, options).await
    }

    async fn read(&self, name: &str) -> Result<Vec<HeldLock>, LockError> {
        let exec = self.executor();
        let key = format!("{}{name}", self.prefix());
        let masters = masters::masters(exec).await?;
        let master = masters::master_for(&masters, &key)?;
        let mut found = read::describe_batch(
            exec,
            master,
            &[(name.to_owned(), key, read::Seen::ALL)],
            true,
        )
        .await?;
        Ok(found.pop().unwrap_or_default())
    }

    async fn release_held(&self, name: &str, token: &str) -> Result<bool, LockError> {
        self.release_token(name, token).await
    }

    async fn release_feed(&self) -> Result<Option<Box<dyn ReleaseFeed>>, LockError> {
        let Some(subscriber) = self.subscriber() else {
            return Ok(None);
        };
        let origin = subscriber.connects_to();
        let limit = self.executor().command_timeout();
        let feed = feed::Feed::start(&origin, self.prefix(), limit).await?;
        Ok(Some(Box::new(feed)))
    }
}
