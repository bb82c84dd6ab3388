//! The lock is released on every way out of the body: return, early return, `?`, panic, and
//! cancellation of the caller's future.

use std::sync::Arc;
use std::time::Duration;

use distlock::{LockError, Locker, distributed_lock};
use tokio::sync::oneshot;

use crate::common::{AppError, Backend, SOON, each_backend};

#[distributed_lock("exit:{how}", locker = locker)]
async fn exits(locker: &Locker, how: &str) -> Result<u32, AppError> {
    match how {
        "return" => Ok(1),
        "early" => {
            if how.len() == 5 {
                return Ok(2);
            }
            unreachable!()
        }
        "question-mark" => {
            let n: u32 = "not a number"
                .parse()
                .map_err(|_| AppError::Invalid(how.into()))?;
            Ok(n)
        }
        "panic" => panic!("the body panicked"),
        _ => unreachable!(),
    }
}

#[distributed_lock("exit:{how}", locker = locker)]
async fn until_cancelled(
    locker: &Locker,
    how: &str,
    started: oneshot::Sender<()>,
) -> Result<(), LockError> {
    started.send(()).expect("the test waits");
    std::future::pending::<()>().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_exit_releases_the_lock() {
    each_backend(|backend: Arc<Backend>| async move {
        let locker = &backend.locker;
        assert_eq!(exits(locker, "return").await.expect("ok"), 1);
        assert!(backend.is_free("exit:return").await);

        assert_eq!(exits(locker, "early").await.expect("ok"), 2);
        assert!(backend.is_free("exit:early").await);

        let error = exits(locker, "question-mark")
            .await
            .expect_err("parse error");
        assert!(matches!(error, AppError::Invalid(_)), "{error:?}");
        assert!(backend.is_free("exit:question-mark").await);

        let panicked = tokio::spawn({
            let locker = locker.clone();
            async move { exits(&locker, "panic").await }
        })
        .await;
        assert!(panicked.expect_err("panicked").is_panic());
        // Released by the guard's drop, in the background: a waiter gets it promptly.
        assert!(backend.free_within("exit:panic", SOON).await);

        let (started, is_started) = oneshot::channel();
        let call = tokio::spawn({
            let locker = locker.clone();
            async move { until_cancelled(&locker, "cancel", started).await }
        });
        is_started.await.expect("the body started");
        assert!(
            !backend.is_free("exit:cancel").await,
            "held while the body runs"
        );
        call.abort();
        assert!(call.await.expect_err("aborted").is_cancelled());
        assert!(backend.free_within("exit:cancel", SOON).await);

        // A timeout around the call cancels it the same way.
        let (started, _is_started) = oneshot::channel();
        let timed_out = tokio::time::timeout(
            Duration::from_millis(50),
            until_cancelled(locker, "timeout", started),
        )
        .await;
        assert!(timed_out.is_err());
        assert!(backend.free_within("exit:timeout", SOON).await);
    })
    .await;
}
