//! Releases on etcd counted for `watch`: one etcd watch on the whole prefix, deletes only
//! (`NoPut`), counting the deletes of lock keys (a mutex, fair lock or writer released, or its
//! etcd lease expired) and of readers' keys, per lock name. Semaphore holders' deletes are not
//! counted: a busy semaphore attempt deletes its own key too, so they are no release signal.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use etcd_client::{EventType, WatchFilterType, WatchOptions};

use super::keys::{self, Parsed, Space};
use super::{EtcdTarget, bounded, read::prefix_end};
use crate::exit::Failure;
use crate::inspect::LockInfo;
use crate::store::Releases;

/// Releases seen per lock name since the last refresh.
type Counts = Arc<Mutex<HashMap<String, u64>>>;

/// The deletes under the prefix, counted by a task that reads the watch.
pub(crate) struct EtcdReleases {
    counts: Counts,
    task: tokio::task::JoinHandle<()>,
}

impl EtcdReleases {
    /// Starts the watch on the prefix.
    ///
    /// # Errors
    /// A backend failure when the watch is not set up within the command timeout.
    ///
    /// # Cancel safety
    /// Cancel safe: dropped, no watch is left behind.
    pub(crate) async fn start(target: &EtcdTarget) -> Result<Self, Failure> {
        let options = WatchOptions::new()
            .with_range(prefix_end(target.prefix.as_bytes()))
            .with_filters([WatchFilterType::NoPut]);
        let mut watch = target.client.watch_client();
        let mut stream = bounded(
            &format!("watching the keys under {:?}", target.prefix),
            target.command_timeout,
            watch.watch(target.prefix.as_bytes(), Some(options)),
        )
        .await?;
        let counts: Counts = Arc::default();
        let (prefix, c) = (target.prefix.clone(), Arc::clone(&counts));
        let task = tokio::spawn(async move {
            // Ends with the stream (the cluster gone): the counts then stay at zero.
            while let Ok(Some(response)) = stream.message().await {
                for event in response.events() {
                    let Some(kv) = event.kv() else { continue };
                    if event.event_type() != EventType::Delete {
                        continue;
                    }
                    let name = match keys::parse(&prefix, kv.key()) {
                        Some(Parsed::Lock(name) | Parsed::Derived(Space::Reader, name)) => name,
                        _ => continue,
                    };
                    *c.lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .entry(name.to_owned())
                        .or_default() += 1;
                }
            }
        });
        Ok(Self { counts, task })
    }
}

impl Drop for EtcdReleases {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[async_trait]
impl Releases for EtcdReleases {
    /// Nothing to do: the watch covers every name under the prefix, and etcd does not count
    /// watchers as waiters.
    async fn follow(&mut self, _locks: &mut [LockInfo]) {}

    fn take_rates(&mut self, seconds: f64) -> HashMap<String, f64> {
        let taken =
            std::mem::take(&mut *self.counts.lock().unwrap_or_else(PoisonError::into_inner));
        taken
            .into_iter()
            // Counts far below 2^52.
            .map(|(name, n)| (name, n as f64 / seconds))
            .collect()
    }
}
