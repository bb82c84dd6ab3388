//! Redlock grants mutexes only: the other lock kinds are refused with a typed error, and
//! nothing reaches the nodes.

use lock_core::{LockError, Locker, MemoryLock};
use lock_redlock::Redlock;
use std::sync::Arc;

#[tokio::test]
async fn read_write_and_semaphore_requests_are_unsupported() {
    let nodes: Vec<Arc<MemoryLock>> = (0..3).map(|_| Arc::new(MemoryLock::new())).collect();
    let redlock = Redlock::builder()
        .nodes(nodes.iter().map(Arc::clone))
        .build()
        .expect("three nodes");
    let locker = Locker::new(redlock);
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
