//! `wait = ".."`: how long a call waits for a held lock before the error policy returns
//! `LockError::Timeout { phase: Wait }`.

use std::sync::Arc;
use std::time::Duration;

use distlock::{LockError, Locker, TimeoutPhase, distributed_lock};

use crate::common::{Backend, each_backend};

#[distributed_lock("account:{id}", locker = locker, wait = "100ms")]
async fn short_wait(locker: &Locker, id: u32) -> Result<u32, LockError> {
    Ok(id)
}

#[distributed_lock("account:{id}", locker = locker, wait = "0s")]
async fn one_try(locker: &Locker, id: u32) -> Result<u32, LockError> {
    Ok(id)
}

#[distributed_lock("account:{id}", locker = locker, wait = "1m")]
async fn long_wait(locker: &Locker, id: u32) -> Result<u32, LockError> {
    Ok(id)
}

fn is_wait_timeout(result: &Result<u32, LockError>) -> bool {
    matches!(
        result,
        Err(LockError::Timeout {
            phase: TimeoutPhase::Wait,
            ..
        })
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_lock_times_out_after_the_wait() {
    each_backend(|backend: Arc<Backend>| async move {
        let release = backend.hold_elsewhere("account:1").await;
        let result = short_wait(&backend.locker, 1).await;
        assert!(is_wait_timeout(&result), "{result:?}");
        let result = one_try(&backend.locker, 1).await;
        assert!(is_wait_timeout(&result), "{result:?}");
        assert_eq!(
            one_try(&backend.locker, 2)
                .await
                .expect("another name is free"),
            2
        );
        drop(release);
        assert_eq!(long_wait(&backend.locker, 1).await.expect("released"), 1);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_call_gets_the_lock_when_it_is_released() {
    each_backend(|backend: Arc<Backend>| async move {
        let release = backend.hold_elsewhere("account:7").await;
        let waiting = tokio::spawn({
            let locker = backend.locker.clone();
            async move { long_wait(&locker, 7).await }
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        drop(release); // the waiter is woken by the release, well before its wait runs out
        assert_eq!(waiting.await.expect("no panic").expect("acquired"), 7);
    })
    .await;
}
