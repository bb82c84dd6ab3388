//! PostgreSQL down: every operation fails with a retryable, typed error within its timeouts,
//! and the lock works again once the server is back.

use crate::common::{self, token};

use std::time::{Duration, Instant};

use lock_core::backend::{Attempt, Lock};
use lock_core::{Lease, LockError, Locker};
use lock_postgres::PostgresLock;

const TTL: Duration = Duration::from_secs(10);

#[tokio::test]
async fn a_stopped_server_gives_retryable_errors_in_bounded_time() {
    let mut server = common::server();
    let lock = PostgresLock::builder()
        .url(server.url())
        .connect_timeout(Duration::from_secs(1))
        .statement_timeout(Duration::from_secs(1))
        .build()
        .expect("build");
    lock.migrate().await.expect("migrate");
    let Attempt::Acquired(lease) = lock.try_acquire("job", token(), TTL).await.expect("up") else {
        panic!("busy");
    };

    server.stop();

    // Bounded: connect timeout plus statement timeout, with room for a loaded machine.
    let bound = Duration::from_secs(5);
    let started = Instant::now();
    let err = lock
        .try_acquire("job", token(), TTL)
        .await
        .expect_err("down");
    assert!(err.is_retryable(), "{err}");
    assert!(err.may_have_applied(), "{err}");
    assert!(
        matches!(err, LockError::Backend { .. } | LockError::Timeout { .. }),
        "{err}"
    );
    for result in [
        lock.extend(&lease, TTL).await.map(drop),
        lock.release(&lease).await.map(drop),
        lock.ping().await,
    ] {
        let err = result.expect_err("down");
        assert!(err.is_retryable(), "{err}");
    }
    assert!(
        started.elapsed() < bound * 4,
        "took {:?}",
        started.elapsed()
    );

    // A locker retries within its wait, then reports the store's error, not a busy lock.
    let locker = Locker::builder(PostgresLock::from_url(&server.url()).expect("url"))
        .retry_errors_for(Duration::from_millis(300))
        .build();
    let err = locker
        .lock("other")
        .wait(Duration::from_secs(2))
        .await
        .expect_err("down");
    assert!(err.is_retryable(), "{err}");

    server.start_again().expect("start again");
    let mut back: Option<Lease> = None;
    for _ in 0..20 {
        if let Ok(Attempt::Acquired(lease)) = lock.try_acquire("fresh", token(), TTL).await {
            back = Some(lease);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        back.is_some(),
        "the lock did not work again after the restart"
    );
}
