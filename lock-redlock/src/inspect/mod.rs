//! Operator reads on a Redlock (lock-core's [`Inspect`]): each node is read through its own
//! inspector, all at once, and a name is shown as held when a quorum of the nodes hold it with
//! the same token (`quorum.rs`); `inspect` also gives each node's own answer. A release by
//! token is the Redlock's release of a lease carrying that token: compare and delete on every
//! node, released when a quorum released.

mod feed;
mod quorum;

use std::collections::HashMap;

use async_trait::async_trait;
use lock_core::backend::{HeldLock, Inspect, ListOptions, Listing, NamePattern, ReleaseFeed};
use lock_core::{Lease, LockError, Op, Token};

use crate::Redlock;
use crate::error::BACKEND;

/// The prefix a Redis node's token value carries (`dl:`), accepted before a token's hex.
const REDIS_TOKEN_PREFIX: &str = "dl:";

impl Redlock {
    /// Every node's answer to `read`, at once: its answer, or why it has none.
    async fn on_each<'a, T, F, Fut>(&'a self, read: F) -> Vec<Result<T, String>>
    where
        F: Fn(&'a dyn Inspect) -> Fut,
        Fut: Future<Output = Result<T, LockError>> + 'a,
    {
        let reads = self.nodes().map(|(label, lock)| {
            let read = lock.inspector().map(&read);
            async move {
                match read {
                    Some(read) => read.await.map_err(|e| one_line(&e)),
                    None => Err(format!("{label}: its backend offers no operator reads")),
                }
            }
        });
        futures::future::join_all(reads).await
    }

    /// An error unless a quorum of nodes answered: with fewer, "no quorum holds it" could be
    /// wrong.
    fn need_quorum<T>(&self, answers: &[Result<T, String>]) -> Result<(), LockError> {
        let answered = answers.iter().filter(|a| a.is_ok()).count();
        if answered >= self.quorum() {
            return Ok(());
        }
        let why: Vec<String> = self
            .nodes()
            .zip(answers)
            .filter_map(|((label, _), a)| a.as_ref().err().map(|e| format!("{label}: {e}")))
            .collect();
        Err(LockError::Backend {
            backend: BACKEND,
            op: Op::Read,
            retryable: true,
            source: format!(
                "only {answered} of {} Redlock nodes answered ({} needed): {}",
                self.node_count(),
                self.quorum(),
                why.join("; ")
            )
            .into(),
        })
    }

    /// The nodes' labels, and why each did not answer.
    fn labels_and_errors<T>(
        &self,
        answers: &[Result<T, String>],
    ) -> (Vec<&str>, Vec<Option<String>>) {
        let labels = self.nodes().map(|(label, _)| label).collect();
        let errors = answers.iter().map(|a| a.as_ref().err().cloned()).collect();
        (labels, errors)
    }
}

/// An error on one line (a node's reason among others).
fn one_line(error: &LockError) -> String {
    error.to_string().replace('\n', " ")
}

#[async_trait]
impl Inspect for Redlock {
    async fn list(
        &self,
        pattern: &NamePattern,
        options: &ListOptions,
    ) -> Result<Listing, LockError> {
        let mut scanned = 0;
        let mut truncated = false;
        let listings: Vec<Result<Vec<HeldLock>, String>> = self
            .on_each(|inspector| inspector.list(pattern, options))
            .await
            .into_iter()
            .map(|listing| {
                listing.map(|l| {
                    scanned += l.scanned;
                    truncated |= l.truncated;
                    l.locks
                })
            })
            .collect();
        self.need_quorum(&listings)?;
        let (labels, errors) = self.labels_and_errors(&listings);
        let locks = quorum::by_lock(&listings)
            .values()
            .filter_map(|found| quorum::aggregate(&labels, found, &errors, false, false))
            .collect();
        let mut listing = Listing::new(locks, scanned);
        listing.truncated = truncated;
        Ok(listing)
    }

    async fn read(&self, name: &str) -> Result<Vec<HeldLock>, LockError> {
        let answers = self.on_each(|inspector| inspector.inspect(name)).await;
        self.need_quorum(&answers)?;
        let (labels, errors) = self.labels_and_errors(&answers);
        Ok(quorum::by_lock(&answers)
            .values()
            .filter_map(|found| quorum::aggregate(&labels, found, &errors, true, true))
            .collect())
    }

    async fn release_held(&self, name: &str, token: &str) -> Result<bool, LockError> {
        let hex = token.strip_prefix(REDIS_TOKEN_PREFIX).unwrap_or(token);
        let token: Token = hex.parse().map_err(|_| {
            LockError::invalid(
                "a Redlock token is 32 hex digits (after `dl:` on Redis nodes), as `ls` and \
                 `show` print it",
            )
        })?;
        // The lease only carries the name and the token: a release reads nothing else.
        let lease = Lease::new(
            name,
            token,
            0,
            tokio::time::Instant::now() + crate::NODE_TIMEOUT_CEILING,
        );
        lock_core::backend::Lock::release(self, &lease).await
    }

    async fn release_feed(&self) -> Result<Option<Box<dyn ReleaseFeed>>, LockError> {
        let mut each = Vec::new();
        for (_, lock) in self.nodes() {
            // A node whose subscription fails only leaves its own count out.
            if let Some(inspector) = lock.inspector()
                && let Ok(Some(feed)) = inspector.release_feed().await
            {
                each.push(feed);
            }
        }
        if each.is_empty() {
            return Ok(None);
        }
        Ok(Some(Box::new(feed::LargestOf::new(each))))
    }
}

/// Per name, the largest of several counts.
fn largest(into: &mut HashMap<String, u64>, counts: HashMap<String, u64>) {
    for (name, n) in counts {
        let entry = into.entry(name).or_default();
        *entry = (*entry).max(n);
    }
}
