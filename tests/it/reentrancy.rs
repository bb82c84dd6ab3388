//! Nested calls on the same name in one task re-enter instead of waiting for themselves: the
//! body runs in the caller's task, where the lock is held. Other tasks still wait.

use std::sync::Arc;

use distlock::{LockError, Locker, distributed_lock};

use crate::common::{Backend, each_backend};

#[distributed_lock("account:{id}", locker = locker)]
async fn transfer(locker: &Locker, id: u32) -> Result<(u64, u64, bool), LockError> {
    let outer = distlock::current_lease().expect("locked").fencing_token();
    let inner = audit(locker, id).await?;
    let other_task_waits = {
        let locker = locker.clone();
        tokio::spawn(async move { audit(&locker, id).await })
            .await
            .expect("no panic")
            .is_err()
    };
    Ok((outer, inner, other_task_waits))
}

/// Locks the same name with no wait at all: only reentrancy lets it in.
#[distributed_lock("account:{id}", locker = locker, wait = "0s")]
async fn audit(locker: &Locker, id: u32) -> Result<u64, LockError> {
    Ok(distlock::current_lease().expect("locked").fencing_token())
}

#[distributed_lock("account:{id}", locker = locker)]
async fn task_of_body(locker: &Locker, id: u32) -> Result<tokio::task::Id, LockError> {
    Ok(tokio::task::id())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nested_call_on_the_same_name_reenters() {
    each_backend(|backend: Arc<Backend>| async move {
        let locker = &backend.locker;
        let (outer, inner, other_task_waits) = transfer(locker, 1).await.expect("no deadlock");
        assert_eq!(outer, inner, "the nested call shares the outer lease");
        assert!(other_task_waits, "another task is another owner");
        assert!(
            backend.is_free("account:1").await,
            "released by the outer call"
        );
        assert_eq!(
            task_of_body(locker, 2).await.expect("ok"),
            tokio::task::id(),
            "the body runs in the caller's task"
        );
    })
    .await;
}
