//! Release announcements counted for a watcher (`distlock watch`'s RELEASES/S): a pattern
//! subscription on a single server (or the master Sentinel names), the channels of the names
//! followed on a cluster (sharded pub/sub has no patterns). Connected where the lock's own
//! release subscriber connects.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use futures::StreamExt;
use lock_core::LockError;
use lock_core::backend::ReleaseFeed;

use crate::feeds::subscriber::Origin;
use crate::layout::{LockKeys, RELEASED_SUFFIX};

/// Releases counted per channel since the last take.
type Counts = Arc<Mutex<HashMap<String, u64>>>;

/// At most this many channels are followed on a cluster, one sharded subscription each.
#[cfg(feature = "cluster")]
const MAX_SHARDED: usize = 1000;

/// The release feed of one deployment.
pub(super) struct Feed {
    prefix: String,
    counts: Counts,
    #[cfg(feature = "cluster")]
    sharded: Option<Sharded>,
    /// The pattern subscription's task, ended with the feed.
    task: Option<tokio::task::JoinHandle<()>>,
}

/// A cluster's sharded subscriptions, one per followed channel.
#[cfg(feature = "cluster")]
struct Sharded {
    conn: redis::cluster_async::ClusterConnection,
    followed: std::collections::HashSet<String>,
}

impl Drop for Feed {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// Counts one announcement on `channel`.
fn count(counts: &Counts, channel: &str) {
    *counts
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .entry(channel.to_owned())
        .or_default() += 1;
}

/// The error of a failed subscription.
fn failed(error: redis::RedisError) -> LockError {
    crate::error::from_redis(error, lock_core::Op::Connect, "", std::time::Duration::ZERO)
}

impl Feed {
    /// Subscribes where `origin` says, bounded by `limit`.
    ///
    /// # Errors
    /// [`LockError::Timeout`] / [`LockError::Backend`] when subscribing fails.
    pub(super) async fn start(
        origin: &tokio::sync::Mutex<Origin>,
        prefix: &str,
        limit: std::time::Duration,
    ) -> Result<Self, LockError> {
        let counts: Counts = Arc::default();
        let timed = |e| crate::error::timeout(lock_core::TimeoutPhase::Connect, e);
        let client = match &mut *origin.lock().await {
            Origin::Client(client) => client.clone(),
            #[cfg(feature = "sentinel")]
            Origin::Sentinel(sentinel) => sentinel.async_get_client().await.map_err(failed)?,
            #[cfg(feature = "cluster")]
            Origin::Cluster(urls) => {
                return Self::sharded(urls.clone(), prefix, counts, limit).await;
            }
        };
        let mut pubsub = tokio::time::timeout(limit, client.get_async_pubsub())
            .await
            .map_err(|_| timed(limit))?
            .map_err(failed)?;
        pubsub
            .psubscribe(format!("*{RELEASED_SUFFIX}"))
            .await
            .map_err(failed)?;
        let c = Arc::clone(&counts);
        let task = tokio::spawn(async move {
            let mut messages = pubsub.into_on_message();
            while let Some(message) = messages.next().await {
                count(&c, message.get_channel_name());
            }
        });
        Ok(Self {
            prefix: prefix.to_owned(),
            counts,
            #[cfg(feature = "cluster")]
            sharded: None,
            task: Some(task),
        })
    }

    /// A cluster's feed: a RESP3 cluster connection whose sharded messages are counted.
    #[cfg(feature = "cluster")]
    async fn sharded(
        urls: Vec<String>,
        prefix: &str,
        counts: Counts,
        limit: std::time::Duration,
    ) -> Result<Self, LockError> {
        let (push_tx, mut pushes) = tokio::sync::mpsc::unbounded_channel::<redis::PushInfo>();
        let conn = redis::cluster::ClusterClientBuilder::new(urls)
            .use_protocol(redis::ProtocolVersion::RESP3)
            .push_sender(push_tx)
            .connection_timeout(limit)
            .response_timeout(limit)
            .build()
            .map_err(failed)?
            .get_async_connection()
            .await
            .map_err(failed)?;
        let c = Arc::clone(&counts);
        let task = tokio::spawn(async move {
            while let Some(push) = pushes.recv().await {
                if push.kind == redis::PushKind::SMessage
                    && let Some(redis::Value::BulkString(channel)) = push.data.first()
                {
                    count(&c, &String::from_utf8_lossy(channel));
                }
            }
        });
        Ok(Self {
            prefix: prefix.to_owned(),
            counts,
            sharded: Some(Sharded {
                conn,
                followed: std::collections::HashSet::new(),
            }),
            task: Some(task),
        })
    }
}

#[async_trait]
impl ReleaseFeed for Feed {
    async fn follow(&mut self, names: &[&str]) -> HashMap<String, u64> {
        #[cfg_attr(not(feature = "cluster"), allow(unused_mut))]
        let mut own = HashMap::new();
        #[cfg(feature = "cluster")]
        if let Some(Sharded { conn, followed }) = &mut self.sharded {
            for name in names {
                let channel = LockKeys::of_key(&format!("{}{name}", self.prefix)).released;
                if followed.contains(&channel) {
                    // This feed's own subscription is one of the channel's subscribers.
                    own.insert((*name).to_owned(), 1);
                } else if followed.len() < MAX_SHARDED {
                    // A failed subscription only leaves this name's count at zero.
                    if conn.ssubscribe(&channel).await.is_ok() {
                        followed.insert(channel);
                    }
                }
            }
        }
        let _ = names;
        own
    }

    fn take_counts(&mut self) -> HashMap<String, u64> {
        let taken =
            std::mem::take(&mut *self.counts.lock().unwrap_or_else(PoisonError::into_inner));
        taken
            .into_iter()
            .filter_map(|(channel, n)| {
                let (key, _) = LockKeys::owner_of(&channel)?;
                Some((key.strip_prefix(self.prefix.as_str())?.to_owned(), n))
            })
            .collect()
    }
}
