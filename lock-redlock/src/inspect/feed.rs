//! Release counts over several nodes: per name, the largest of theirs. One Redlock release is
//! announced by every node that released its key (a quorum at least), so a sum would count it
//! N times; a node that missed it (down, lagging) only lowers its own count.

use std::collections::HashMap;

use async_trait::async_trait;
use lock_core::backend::ReleaseFeed;

use super::largest;

/// The nodes' release feeds, read as one.
pub(super) struct LargestOf(Vec<Box<dyn ReleaseFeed>>);

impl LargestOf {
    /// Over the feeds of the nodes that have one.
    pub(super) fn new(feeds: Vec<Box<dyn ReleaseFeed>>) -> Self {
        Self(feeds)
    }
}

#[async_trait]
impl ReleaseFeed for LargestOf {
    async fn follow(&mut self, names: &[&str]) -> HashMap<String, u64> {
        let mut own = HashMap::new();
        for feed in &mut self.0 {
            largest(&mut own, feed.follow(names).await);
        }
        own
    }

    fn take_counts(&mut self) -> HashMap<String, u64> {
        let mut counts = HashMap::new();
        for feed in &mut self.0 {
            largest(&mut counts, feed.take_counts());
        }
        counts
    }
}
