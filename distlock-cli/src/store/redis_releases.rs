//! Release announcements on Redis counted for `watch`: a pattern subscription on a single
//! server, the channels of the names seen held on a cluster (sharded pub/sub has no patterns).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use futures::StreamExt;
use lock_redis::LockKeys;

use super::Releases;
use crate::connect::Target;
use crate::exit::Failure;
use crate::inspect;

/// Releases announced per release channel since the last refresh.
type Counts = Arc<Mutex<HashMap<String, u64>>>;

/// At most this many release channels are followed on a cluster.
#[cfg(feature = "cluster")]
const MAX_SHARDED: usize = 1000;

/// Release announcements counted on one deployment, per lock name (the prefix taken off).
pub(crate) struct RedisReleases {
    prefix: String,
    way: Way,
}

impl RedisReleases {
    /// Starts counting on every master.
    ///
    /// # Errors
    /// A backend failure when subscribing fails.
    pub(crate) async fn start(target: &Target) -> Result<Self, Failure> {
        Ok(Self {
            prefix: target.prefix.clone(),
            way: Way::start(target).await?,
        })
    }
}

#[async_trait]
impl Releases for RedisReleases {
    async fn follow(&mut self, locks: &mut [inspect::LockInfo]) {
        self.way.follow(locks).await;
    }

    fn take_rates(&mut self, seconds: f64) -> HashMap<String, f64> {
        take_rates(self.way.counts(), &self.prefix, seconds)
    }
}

/// Where release announcements are counted.
enum Way {
    /// A single server: `PSUBSCRIBE *:distlock-released` sees every name's releases.
    Pattern(Counts),
    /// A cluster: releases are announced with sharded pub/sub, which has no patterns, so the
    /// channel of each name seen held is subscribed (`SSUBSCRIBE`) from then on.
    #[cfg(feature = "cluster")]
    Sharded {
        conn: redis::cluster_async::ClusterConnection,
        followed: std::collections::HashSet<String>,
        counts: Counts,
    },
    /// Not counted (a cluster, without the `cluster` feature).
    #[cfg_attr(feature = "cluster", allow(dead_code))]
    Off,
}

impl Way {
    /// Starts counting on every node.
    async fn start(target: &Target) -> Result<Self, Failure> {
        let counts: Counts = Arc::default();
        if target.cluster {
            #[cfg(feature = "cluster")]
            return Self::sharded(target, counts).await;
            #[cfg(not(feature = "cluster"))]
            return Ok(Self::Off);
        }
        for node in &target.nodes {
            let client = target.tls.client(node.info.clone())?;
            let failed = |e: &redis::RedisError| {
                Failure::backend(&format!("subscribing on {}", node.addr), e)
            };
            let mut pubsub = client.get_async_pubsub().await.map_err(|e| failed(&e))?;
            pubsub
                .psubscribe("*:distlock-released")
                .await
                .map_err(|e| failed(&e))?;
            let counts = Arc::clone(&counts);
            tokio::spawn(async move {
                let mut messages = pubsub.into_on_message();
                while let Some(message) = messages.next().await {
                    count(&counts, message.get_channel_name());
                }
            });
        }
        Ok(Self::Pattern(counts))
    }

    /// A RESP3 cluster connection whose sharded messages are counted.
    #[cfg(feature = "cluster")]
    async fn sharded(target: &Target, counts: Counts) -> Result<Self, Failure> {
        let (push_tx, mut pushes) = tokio::sync::mpsc::unbounded_channel::<redis::PushInfo>();
        let infos: Vec<redis::ConnectionInfo> =
            target.nodes.iter().map(|n| n.info.clone()).collect();
        let conn = redis::cluster::ClusterClientBuilder::new(infos)
            .use_protocol(redis::ProtocolVersion::RESP3)
            .push_sender(push_tx)
            .connection_timeout(target.command_timeout)
            .response_timeout(target.command_timeout)
            .build()?
            .get_async_connection()
            .await
            .map_err(|e| Failure::backend("subscribing on the cluster", &e))?;
        let c = Arc::clone(&counts);
        tokio::spawn(async move {
            while let Some(push) = pushes.recv().await {
                if push.kind == redis::PushKind::SMessage
                    && let Some(redis::Value::BulkString(channel)) = push.data.first()
                {
                    count(&c, &String::from_utf8_lossy(channel));
                }
            }
        });
        Ok(Self::Sharded {
            conn,
            followed: std::collections::HashSet::new(),
            counts,
        })
    }

    /// On a cluster, subscribes to the release channels of `locks` not yet followed, and
    /// takes this watch's own subscription out of their waiters (it read them after
    /// subscribing, or before: then it counted none).
    async fn follow(&mut self, locks: &mut [inspect::LockInfo]) {
        #[cfg(feature = "cluster")]
        if let Self::Sharded { conn, followed, .. } = self {
            for lock in locks.iter_mut() {
                let channel = LockKeys::of_key(&lock.key).released;
                if followed.contains(&channel) {
                    lock.waiters = lock.waiters.saturating_sub(1);
                } else if followed.len() < MAX_SHARDED {
                    // A failed subscription only leaves this name's count at zero.
                    if conn.ssubscribe(&channel).await.is_ok() {
                        followed.insert(channel);
                    }
                }
            }
        }
        let _ = locks;
    }

    /// The counts, when releases are counted.
    fn counts(&self) -> Option<&Counts> {
        match self {
            Self::Pattern(counts) => Some(counts),
            #[cfg(feature = "cluster")]
            Self::Sharded { counts, .. } => Some(counts),
            Self::Off => None,
        }
    }
}

/// One more release on `channel`.
fn count(counts: &Counts, channel: &str) {
    *counts
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .entry(channel.to_owned())
        .or_default() += 1;
}

/// Releases per second per lock name since the last call, and the counts reset.
fn take_rates(counts: Option<&Counts>, prefix: &str, seconds: f64) -> HashMap<String, f64> {
    let Some(counts) = counts else {
        return HashMap::new();
    };
    let taken = std::mem::take(&mut *counts.lock().unwrap_or_else(PoisonError::into_inner));
    taken
        .into_iter()
        .filter_map(|(channel, n)| {
            let (key, _) = LockKeys::owner_of(&channel)?;
            let name = key.strip_prefix(prefix)?.to_owned();
            #[allow(clippy::cast_precision_loss)] // counts far below 2^52
            Some((name, n as f64 / seconds))
        })
        .collect()
}
