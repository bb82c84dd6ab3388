//! Releases counted for a watcher (`distlock watch`'s RELEASES/S): one etcd watch on the whole
//! prefix, deletes only, counting the deletes of lock keys (a mutex, fair lock or writer
//! released, or its etcd lease run out) and of readers' keys, per lock name. Semaphore
//! holders' deletes are not counted: a busy semaphore attempt deletes its own key too, so they
//! are no release signal.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use etcd_client::{EventType, WatchFilterType, WatchOptions};
use lock_core::backend::ReleaseFeed;
use lock_core::{LockError, Op, TimeoutPhase};

use crate::error::bounded;
use crate::executor::Executor;
use crate::layout::{Parsed, Space, parse, prefix_end};

/// Releases seen per lock name since the last take.
type Counts = Arc<Mutex<HashMap<String, u64>>>;

/// The deletes under the prefix, counted by a task that reads the watch (stopped when
/// dropped).
pub(super) struct Releases {
    counts: Counts,
    task: tokio::task::JoinHandle<()>,
}

impl Releases {
    /// Starts the watch on the prefix, on the current runtime.
    ///
    /// # Errors
    /// [`LockError::Timeout`] / [`LockError::Backend`] when the watch is not set up within
    /// the command timeout.
    pub(super) async fn start(exec: &Executor) -> Result<Self, LockError> {
        let client = exec.client().await?;
        let prefix = exec.prefix().to_owned();
        let options = WatchOptions::new()
            .with_range(prefix_end(prefix.as_bytes()))
            .with_filters([WatchFilterType::NoPut]);
        let mut watch = client.watch_client();
        let mut stream = bounded(
            Op::Read,
            TimeoutPhase::Command,
            exec.command_timeout(),
            watch.watch(prefix.as_bytes(), Some(options)),
        )
        .await?;
        let counts: Counts = Arc::default();
        let seen = Arc::clone(&counts);
        let task = tokio::spawn(async move {
            // Ends with the stream (the cluster gone): the counts then stay at zero.
            while let Ok(Some(response)) = stream.message().await {
                for event in response.events() {
                    let Some(kv) = event.kv() else { continue };
                    if event.event_type() != EventType::Delete {
                        continue;
                    }
                    let name = match parse(&prefix, kv.key()) {
                        Some(Parsed::Lock(name)) => name,
                        Some(Parsed::Derived {
                            space: Space::Reader,
                            name,
                            ..
                        }) => name,
                        _ => continue,
                    };
                    *seen
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .entry(name.to_owned())
                        .or_default() += 1;
                }
            }
        });
        Ok(Self { counts, task })
    }
}

impl Drop for Releases {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[async_trait]
impl ReleaseFeed for Releases {
    /// Nothing to follow: the watch covers every name under the prefix, and etcd counts no
    /// watcher as a waiter.
    async fn follow(&mut self, _names: &[&str]) -> HashMap<String, u64> {
        HashMap::new()
    }

    fn take_counts(&mut self) -> HashMap<String, u64> {
        std::mem::take(&mut *self.counts.lock().unwrap_or_else(PoisonError::into_inner))
    }
}
