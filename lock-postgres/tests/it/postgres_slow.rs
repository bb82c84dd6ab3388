//! PostgreSQL that stops answering (a partition through the fault proxy): a statement fails
//! with a `Command` timeout, a new connection with a `Connect` timeout, each within its limit;
//! once healed, the lock works again.

use crate::common::{self, token};

use std::time::{Duration, Instant};

use lock_core::backend::{Attempt, Lock};
use lock_core::{LockError, TimeoutPhase};
use lock_postgres::PostgresLock;
use lock_testkit::FaultProxy;

const LIMIT: Duration = Duration::from_secs(1);

fn through(proxy: &FaultProxy) -> PostgresLock {
    PostgresLock::builder()
        .url(format!(
            "postgres://postgres@127.0.0.1:{}/postgres",
            proxy.addr().port()
        ))
        .connect_timeout(LIMIT)
        .statement_timeout(LIMIT)
        .build()
        .expect("build")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_stops_answering_gives_timeouts() {
    let server = common::server();
    let proxy = FaultProxy::start(server.addr()).expect("proxy");
    common::lock(&server).await; // migrated directly, with the default timeouts
    let lock = through(&proxy);
    assert!(matches!(
        lock.try_acquire("job", token(), Duration::from_secs(30))
            .await
            .expect("acquire"),
        Attempt::Acquired(_)
    ));

    proxy.partition();
    let started = Instant::now();
    let err = lock
        .try_acquire("other", token(), Duration::from_secs(30))
        .await
        .expect_err("partitioned");
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
    assert!(err.may_have_applied() && err.is_retryable());
    let fresh = through(&proxy);
    let err = fresh.ping().await.expect_err("partitioned");
    assert!(
        matches!(
            err,
            LockError::Timeout {
                phase: TimeoutPhase::Connect,
                ..
            }
        ),
        "{err}"
    );
    // Two limits, with room for a loaded machine; never a hang.
    assert!(
        started.elapsed() < LIMIT * 20,
        "took {:?}",
        started.elapsed()
    );

    proxy.heal();
    let mut back = false;
    for _ in 0..50 {
        if fresh.ping().await.is_ok() && lock.ping().await.is_ok() {
            back = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        back,
        "the lock did not work again after the partition healed"
    );
}
