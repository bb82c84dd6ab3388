//! A statement that does not answer in time (here: blocked on the lease row, which another
//! transaction holds) fails with a `Command` timeout, and the lock keeps working afterwards.
//! (The slow-server case: PostgreSQL has no cheap way to freeze the whole server, so the
//! statement is made slow where it would be in production, waiting on a row lock.)

use crate::common::{self, token};

use std::time::Duration;

use lock_core::backend::{Attempt, Lock};
use lock_core::{LockError, TimeoutPhase};
use lock_postgres::PostgresLock;

#[tokio::test]
async fn a_blocked_statement_times_out() {
    let server = common::server();
    common::lock(&server).await; // migrated with the default timeouts
    let lock = PostgresLock::builder()
        .url(server.url())
        .statement_timeout(Duration::from_secs(1))
        .build()
        .expect("build");
    let Attempt::Acquired(lease) = lock
        .try_acquire("row", token(), Duration::from_secs(30))
        .await
        .expect("acquire")
    else {
        panic!("busy");
    };

    let mut blocker = common::client(&server.url()).await;
    let tx = blocker.transaction().await.expect("begin");
    tx.execute(
        "SELECT 1 FROM distlock_leases WHERE name = 'row' FOR UPDATE",
        &[],
    )
    .await
    .expect("lock the row");

    let err = lock
        .try_acquire("row", token(), Duration::from_secs(30))
        .await
        .expect_err("blocked");
    assert!(
        matches!(
            err,
            LockError::Timeout {
                phase: TimeoutPhase::Command,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.may_have_applied());
    let err = lock.release(&lease).await.expect_err("blocked");
    assert!(err.is_retryable(), "{err}");

    tx.rollback().await.expect("rollback");
    // The timed-out release may still have been applied after the rollback (its cancel
    // request races the unblocking); either way the lock is free again, and a grant the
    // timed-out acquire got late would have been released by the backend.
    lock.release(&lease).await.expect("the lock answers again");
    let mut free = false;
    for _ in 0..50 {
        if let Attempt::Acquired(_) = lock
            .try_acquire("row", token(), Duration::from_secs(30))
            .await
            .expect("try")
        {
            free = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        free,
        "the lock stayed held after the blocked statements settled"
    );
}
