//! The conformance suite (`lock_testkit::conformance`) over a Redlock: every check of every
//! module, one test per module, over three fresh redis-servers (`redis::mutex`)
//! and over three `MemoryLock`s on a paused clock (`memory::...`).
//!
//! What runs comes from the suite's one list and the Redlock's capability table, which it
//! derives from its nodes': the mutex and the multi-lock (the other kinds are checked to be
//! refused before anything is sent); fencing tokens ordered only after a hold longer than the
//! nodes' clocks differ over RedisLock nodes, and not at all over plain counters (README,
//! "Fencing tokens"); releases announced over RedisLock nodes, not over memory nodes.

/// Lockers, each with a Redlock of its own (its own node connections, like another process),
/// over the same three redis-servers.
mod redis {
    use std::time::Duration;

    use std::sync::Arc;

    use lock_core::Locker;
    use lock_redis::RedisLock;
    use lock_redlock::Redlock;
    use lock_testkit::RedisServer;
    use lock_testkit::conformance::{Backend, Fencing, SlowLock};

    /// The nodes' client timeouts: above the Redlock's node timeouts (at most 500 ms), as the
    /// crate docs advise, so a hung node keeps its connection.
    const CLIENT_TIMEOUT: Duration = Duration::from_secs(1);
    /// The per-node timeout: the default for the checks' 500 ms leases is 50 ms, which a
    /// loaded two-core machine misses now and then (a scheduling stall, not a node failing:
    /// four checks share a process, ten processes the cores; 150 ms was missed too, once, with
    /// the machine also compiling). 250 ms still leaves half a lease valid after the slowest
    /// answer.
    const NODE_TIMEOUT: Duration = Duration::from_millis(250);

    fn redlock_over(urls: &[String], latency: Option<Duration>) -> Redlock {
        urls.iter()
            .enumerate()
            .fold(Redlock::builder(), |builder, (i, url)| {
                let node = RedisLock::builder()
                    .url(url.as_str())
                    .connect_timeout(CLIENT_TIMEOUT)
                    .command_timeout(CLIENT_TIMEOUT)
                    .build()
                    .expect("valid URL");
                match latency {
                    // The nodes' answers late, below the Redlock's own bookkeeping.
                    Some(latency) => {
                        builder.named_node(format!("n{i}"), SlowLock::new(Arc::new(node), latency))
                    }
                    None => builder.named_node(format!("n{i}"), node),
                }
            })
            .node_timeout(NODE_TIMEOUT)
            .build()
            .expect("valid Redlock")
    }

    fn setup() -> (Vec<RedisServer>, Backend) {
        let servers: Vec<RedisServer> = (0..3)
            .map(|_| RedisServer::start().expect("start redis-server"))
            .collect();
        let urls: Vec<String> = servers.iter().map(RedisServer::url).collect();
        // The nodes share this host's clock: the default hold of a few milliseconds orders
        // the tokens.
        let late = urls.clone();
        let backend = Backend::new(move || Locker::new(redlock_over(&urls, None)))
            .with_late_answers(move |latency| Locker::new(redlock_over(&late, Some(latency))))
            // Every node at the address: what a Redlock answers when no node can grant.
            .with_address(|at| {
                let url = format!("redis://{at}");
                Locker::new(redlock_over(&[url.clone(), url.clone(), url], None))
            });
        (servers, backend)
    }

    lock_testkit::conformance_tests!(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        setup()
    );

    /// The capability table the suite runs from is derived from the nodes: RedisLock nodes
    /// (clock-scaled tokens, announcements) give ordered-after-holding tokens and wake-ups.
    #[tokio::test]
    async fn capabilities_come_from_the_nodes() {
        let (_servers, backend) = setup();
        let caps = backend.capabilities();
        assert!(
            !caps.read_write && !caps.semaphore && !caps.fair,
            "{caps:?}"
        );
        assert!(backend.announces_releases(), "{caps:?}");
        assert_eq!(backend.fencing(), Fencing::AfterHolding(backend.hold));
        // Holder descriptions over a quorum: the election's observers run.
        assert!(caps.holders, "{caps:?}");
    }
}

/// Lockers, each with a Redlock of its own, over the same three in-process nodes.
mod memory {
    use std::sync::Arc;

    use std::time::Duration;

    use lock_core::backend::Lock;
    use lock_core::{LockError, Locker, MemoryLock};
    use lock_redlock::Redlock;
    use lock_testkit::conformance::{Backend, Fencing, SlowLock};

    fn redlock(nodes: &[Arc<MemoryLock>]) -> Redlock {
        Redlock::builder()
            .nodes(nodes.iter().map(Arc::clone))
            .build()
            .expect("three nodes")
    }

    /// A Redlock over `nodes` whose grants reach each node `latency` late and are answered
    /// `latency` late.
    fn slow_redlock(nodes: &[Arc<MemoryLock>], latency: Duration) -> Redlock {
        Redlock::builder()
            .nodes(nodes.iter().map(|node| {
                let node: Arc<dyn Lock> = Arc::clone(node) as Arc<dyn Lock>;
                SlowLock::new(node, latency)
            }))
            .build()
            .expect("three nodes")
    }

    fn setup() -> (Vec<Arc<MemoryLock>>, Backend) {
        let nodes: Vec<Arc<MemoryLock>> = (0..3).map(|_| Arc::new(MemoryLock::new())).collect();
        let shared = nodes.clone();
        let late = nodes.clone();
        let backend = Backend::new(move || Locker::new(redlock(&shared)))
            .with_late_answers(move |latency| Locker::new(slow_redlock(&late, latency)));
        (nodes, backend)
    }

    lock_testkit::conformance_tests!(
        #[tokio::test(start_paused = true)]
        setup()
    );

    /// Plain counters and no announcements on the nodes: unordered tokens, polling waiters.
    #[tokio::test]
    async fn capabilities_come_from_the_nodes() {
        let (_nodes, backend) = setup();
        assert!(!backend.announces_releases());
        assert_eq!(backend.fencing(), Fencing::Unordered);
        // MemoryLocks describe their holders, so a Redlock over them does (elections are
        // refused for the unordered tokens, but a holder and its note can be read).
        assert!(backend.capabilities().holders);
    }

    /// Over nodes that cannot describe holders, the Redlock declares none and refuses the
    /// observers' calls before anything is sent.
    #[tokio::test]
    async fn holders_are_refused_over_nodes_without_them() {
        use lock_core::backend::Lock;

        let nodes = crate::common::memory::scripted(&[Default::default(); 3]);
        let redlock = crate::common::memory::redlock(&nodes);
        assert!(!redlock.capabilities().holders);
        let answer = redlock.describe_holder("doc").await;
        assert!(
            matches!(
                answer,
                Err(LockError::Unsupported {
                    backend: "redlock",
                    kind: "holder"
                })
            ),
            "{answer:?}"
        );
        let locker = Locker::new(redlock.clone());
        let guard = locker.lock("doc").await.expect("free");
        let answer = redlock.annotate(&guard.lease(), b"x").await;
        assert!(
            matches!(
                answer,
                Err(LockError::Unsupported {
                    backend: "redlock",
                    kind: "holder"
                })
            ),
            "{answer:?}"
        );
        let leader = locker.elect("doc").leader().await;
        assert!(
            matches!(leader, Err(LockError::Unsupported { kind: "holder", .. })),
            "{leader:?}"
        );
        guard.release().await.expect("ours");
    }

    /// Redlock grants mutexes, alone or several at once (the multi-lock): the other lock kinds
    /// are refused with a typed error, and nothing reaches the nodes.
    #[tokio::test]
    async fn read_write_and_semaphore_requests_are_unsupported() {
        let (nodes, _) = setup();
        let locker = Locker::new(redlock(&nodes));
        let answers = [
            ("read", locker.read("doc").try_acquire().await.map(drop)),
            ("write", locker.write("doc").acquire().await.map(drop)),
            (
                "semaphore",
                locker.semaphore("pool", 4).acquire().await.map(drop),
            ),
            (
                "semaphore",
                locker.semaphore("pool", 4).available().await.map(drop),
            ),
        ];
        for (kind, answer) in answers {
            match answer {
                Err(LockError::Unsupported {
                    backend: "redlock",
                    kind: said,
                }) => assert_eq!(said, kind),
                other => panic!("{kind}: {other:?}"),
            }
        }
        assert!(
            nodes.iter().all(|node| node.held_count() == 0),
            "nothing reached the nodes"
        );
        // The mutex still works.
        let guard = locker.lock("doc").await.expect("free");
        guard.release().await.expect("ours");
    }

    /// A multi-lock over a quorum gives back on every node what it took when one name is
    /// busy, and holds every name on every node when it gets them.
    #[tokio::test]
    async fn the_multi_lock_works_over_a_quorum() {
        let (nodes, _) = setup();
        let locker = Locker::new(redlock(&nodes));
        let b = locker.lock("b").await.expect("free");
        let none = locker
            .lock_all(["a", "b"])
            .try_acquire()
            .await
            .expect("answers");
        assert!(none.is_none(), "b is held");
        assert!(
            nodes.iter().all(|node| node.held_count() == 1),
            "a was given back on every node"
        );
        b.release().await.expect("ours");
        let both = locker.lock_all(["a", "b"]).await.expect("free");
        assert!(nodes.iter().all(|node| node.held_count() == 2));
        both.release().await.expect("ours");
    }
}
