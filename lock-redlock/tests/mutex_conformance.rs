//! The exclusive lock's behaviour suite (`lock_testkit::conformance::mutex`) over a Redlock of
//! three fresh redis-servers, and over a Redlock of three `MemoryLock`s on a paused clock.
//!
//! Where Redlock keeps less than a single store, the backend says so (`Backend::fencing`,
//! `Backend::announces_releases`) and the suite checks the weaker promise: fencing tokens are
//! ordered only after a hold longer than the nodes' clocks differ over RedisLock nodes, and
//! not at all over plain counters (README, "Fencing tokens"); memory nodes announce no
//! releases.
//!
//! One test per check and backend, so a failure names both.

mod common;

use std::time::Duration;

use common::memory::{Scripted, nodes, redlock};
use common::servers::{Nodes, redlock_over};
use lock_core::Locker;
use lock_testkit::conformance::{Backend, Fencing};

/// Lockers, each with a Redlock of its own (its own node connections, like another process),
/// over the servers of `nodes`.
fn over_redis(nodes: &Nodes) -> Backend {
    let urls = nodes.urls();
    let mut backend = Backend::new(move || Locker::new(redlock_over(&urls, |b| b)));
    // The nodes share this host's clock: any hold of a few milliseconds orders the tokens.
    backend.fencing = Fencing::AfterHolding(Duration::from_millis(5));
    backend
}

/// Lockers, each with a Redlock of its own, over the same in-process nodes.
fn over_memory(nodes: &[std::sync::Arc<Scripted>]) -> Backend {
    let nodes = nodes.to_vec();
    let mut backend = Backend::new(move || Locker::new(redlock(&nodes)));
    backend.fencing = Fencing::Unordered;
    backend.announces_releases = false;
    backend
}

/// Each check over three redis-servers, `redis::check`, and over three memory nodes (paused
/// clock), `memory::check`.
mod redis {
    lock_testkit::mutex_conformance_tests!(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        {
            let nodes = crate::Nodes::start(3);
            let backend = crate::over_redis(&nodes);
            (nodes, backend)
        }
    );
}

mod memory {
    lock_testkit::mutex_conformance_tests!(
        #[tokio::test(start_paused = true)]
        {
            let nodes = crate::nodes(3);
            let backend = crate::over_memory(&nodes);
            (nodes, backend)
        }
    );
}
