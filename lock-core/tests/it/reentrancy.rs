//! Task-scoped reentrancy: the task that holds a name gets a nested guard when it asks again;
//! other tasks wait; the outermost guard releases.

use std::sync::Arc;
use std::time::Duration;

use crate::common::{Probe, slow_polling_locker};
use lock_core::{LockError, Locker};

const SHORT: Duration = Duration::from_millis(50);

async fn other_task_gets_it(locker: &Locker) -> bool {
    let locker = locker.clone();
    tokio::spawn(async move { locker.lock("a").wait(SHORT).await.map(drop) })
        .await
        .expect("no panic")
        .is_ok()
}

/// Runs `body` as a tokio task: a test's own body (like `main`'s) is not one, and reentrancy is
/// scoped to tasks.
async fn in_task<F: std::future::Future<Output = ()> + Send + 'static>(body: F) {
    tokio::spawn(body).await.expect("no panic");
}

#[tokio::test(start_paused = true)]
async fn outside_a_task_there_is_no_reentrancy() {
    let probe = Arc::new(Probe::default());
    let locker = slow_polling_locker(&probe);
    let _outer = locker.lock("a").await.expect("free");
    let again = locker.lock("a").wait(SHORT).await;
    assert!(
        matches!(again, Err(LockError::Timeout { .. })),
        "the test body is not a tokio task"
    );
}

#[tokio::test(start_paused = true)]
async fn a_task_reenters_a_name_it_holds() {
    in_task(a_task_reenters_a_name_it_holds_body()).await;
}

async fn a_task_reenters_a_name_it_holds_body() {
    let probe = Arc::new(Probe::default());
    let locker = slow_polling_locker(&probe);
    let outer = locker.lock("a").await.expect("free");
    assert!(!outer.is_nested());
    let inner = locker
        .lock("a")
        .wait(Duration::ZERO)
        .await
        .expect("nested, not a deadlock");
    assert!(inner.is_nested());
    assert_eq!(
        inner.fencing_token(),
        outer.fencing_token(),
        "the same lease"
    );
    let single_try = locker
        .lock("a")
        .try_acquire()
        .await
        .expect("ok")
        .expect("nested");
    assert!(single_try.is_nested());
    drop(single_try);
    inner.release().await.expect("ok");
    assert!(
        !other_task_gets_it(&locker).await,
        "the outer guard still holds it"
    );
    outer.release().await.expect("ok");
    assert!(
        other_task_gets_it(&locker).await,
        "released by the outermost guard"
    );
    let fresh = locker.lock("a").await.expect("free");
    assert!(!fresh.is_nested(), "after release, a new outer guard");
}

#[tokio::test(start_paused = true)]
async fn other_tasks_and_spawned_tasks_still_wait() {
    in_task(other_tasks_and_spawned_tasks_still_wait_body()).await;
}

async fn other_tasks_and_spawned_tasks_still_wait_body() {
    let probe = Arc::new(Probe::default());
    let locker = slow_polling_locker(&probe);
    let _outer = locker.lock("a").await.expect("free");
    assert!(!other_task_gets_it(&locker).await);
    let child = {
        let locker = locker.clone();
        tokio::spawn(async move { locker.lock("a").wait(SHORT).await.map(drop) })
    };
    assert!(
        matches!(
            child.await.expect("no panic"),
            Err(LockError::Timeout { .. })
        ),
        "a spawned task is another owner"
    );
}

#[tokio::test(start_paused = true)]
async fn locked_work_can_call_locked_helpers() {
    in_task(locked_work_can_call_locked_helpers_body()).await;
}

async fn locked_work_can_call_locked_helpers_body() {
    let probe = Arc::new(Probe::default());
    let locker = slow_polling_locker(&probe);
    let helper_locker = locker.clone();
    let out = locker
        .lock("order:42")
        .run(|outer| async move {
            helper_locker
                .lock("order:42")
                .run(|inner| async move { inner.fencing_token() == outer.fencing_token() })
                .await
        })
        .await
        .expect("outer")
        .expect("inner");
    assert!(out);
    assert_eq!(probe.inner.held_count(), 0, "released after the outer work");
}
