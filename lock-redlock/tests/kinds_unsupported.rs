//! Redlock grants mutexes, alone or several at once (the multi-lock): the other lock kinds are
//! refused with a typed error, and nothing reaches the nodes.

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

#[tokio::test]
async fn the_multi_lock_works_over_a_quorum() {
    let nodes: Vec<Arc<MemoryLock>> = (0..3).map(|_| Arc::new(MemoryLock::new())).collect();
    let redlock = Redlock::builder()
        .nodes(nodes.iter().map(Arc::clone))
        .build()
        .expect("three nodes");
    let locker = Locker::new(redlock);
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
