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

macro_rules! over_redis_and_memory {
    ($($check:ident),+ $(,)?) => {
        mod redis {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $check() {
                    let nodes = crate::Nodes::start(3);
                    lock_testkit::conformance::mutex::$check(
                        &crate::over_redis(&nodes),
                        stringify!($check),
                    )
                    .await;
                }
            )+
        }

        mod memory {
            $(
                #[tokio::test(start_paused = true)]
                async fn $check() {
                    let nodes = crate::nodes(3);
                    lock_testkit::conformance::mutex::$check(
                        &crate::over_memory(&nodes),
                        stringify!($check),
                    )
                    .await;
                }
            )+
        }
    };
}

over_redis_and_memory!(
    exclusion_among_tasks,
    expiry_frees_the_name,
    stale_release_is_not_ours,
    stale_extend_is_not_ours,
    fencing_increases,
    hand_over_within_one_locker,
    wakeups_across_lockers,
    cancelled_acquire_leaves_nothing,
    renewal_outlives_the_lease,
    fixed_ttl_is_lost,
    renewal_notices_loss,
    bad_input_sends_nothing,
);
