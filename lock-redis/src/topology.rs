//! Which kind of Redis deployment a lock talks to. Code decides on the variant; the strings are
//! for display and metrics labels only.

use std::fmt;

/// The kind of deployment a [`RedisLock`](crate::RedisLock) talks to (see
/// [`RedisLock::topology`](crate::RedisLock::topology)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Topology {
    /// One Redis server, reached through a URL or a pool.
    Single,
    /// A Redis Cluster (feature `cluster`): keys live on the node of their hash slot, and
    /// release announcements use sharded pub/sub.
    Cluster,
    /// The master that a set of sentinels names (feature `sentinel`).
    Sentinel,
}

impl Topology {
    /// The label for logs and metrics: `"single"`, `"cluster"` or `"sentinel"`.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Single => "single",
            Self::Cluster => "cluster",
            Self::Sentinel => "sentinel",
        }
    }
}

impl fmt::Display for Topology {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
