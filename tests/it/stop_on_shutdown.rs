//! `stop_on_shutdown`: the lock is tied to the process's stop signal (`distlock::shutdown()`):
//! on SIGTERM the body is cancelled and the lock released at once, and the function returns
//! `LockError::Stopped`.

use std::sync::Arc;
use std::time::Duration;

use distlock::{LockError, distributed_lock};
use tokio::sync::Notify;
use tokio::time::sleep;

use crate::common::Backend;

#[distributed_lock("stoppable:{id}", locker = backend.locker, stop_on_shutdown)]
async fn long_job(backend: &Backend, id: u32, started: Arc<Notify>) -> Result<(), LockError> {
    started.notify_one();
    sleep(Duration::from_secs(3600)).await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_cancels_the_body_and_releases_the_lock() {
    let backend = Arc::new(Backend::redis());
    let started = Arc::new(Notify::new());
    let job = tokio::spawn({
        let (backend, started) = (Arc::clone(&backend), Arc::clone(&started));
        async move { long_job(&backend, 1, started).await }
    });
    started.notified().await;
    // SIGTERM to this test's own process, by its PID (nextest runs each test in a process of
    // its own; the handler the macro's `shutdown()` installed keeps it alive).
    let sent = std::process::Command::new("kill")
        .args(["-TERM", &std::process::id().to_string()])
        .status()
        .expect("kill");
    assert!(sent.success());
    let answer = tokio::time::timeout(Duration::from_secs(5), job)
        .await
        .expect("the job ended on SIGTERM")
        .expect("task");
    assert!(
        matches!(&answer, Err(LockError::Stopped { name }) if name == "stoppable:1"),
        "{answer:?}"
    );
    assert!(
        backend.is_free("stoppable:1").await,
        "the lock was left to its lease"
    );
}
