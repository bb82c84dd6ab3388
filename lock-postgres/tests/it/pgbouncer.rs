//! Both modes behind a real PgBouncer (lock-testkit's `PgBouncer`, `pool_mode = transaction`,
//! 2 server connections) in front of a throwaway PostgreSQL:
//!
//! - the lease table with `prepared_statements(false)` keeps the whole `Lock` contract (every
//!   conformance check runs behind PgBouncer in `conformance::pgbouncer`), its listener
//!   connecting to PostgreSQL directly (`listen_url`: `LISTEN` is session state, which a
//!   transaction pooler does not keep);
//! - with prepared statements on (the default), a statement that lands on a server connection
//!   without its prepared statement fails with the typed `PreparedStatementsUnsupported`;
//! - the advisory mode is caught (`TransactionPooler`) as soon as a held lease's statement
//!   lands on another server connection.
//!
//! To move the lock's next statement to another server connection on purpose, a second client
//! of the pooler opens a transaction, which pins the server connection the lock used last (the
//! only idle one) until it commits.

use crate::common::{self, token};

use std::time::Duration;

use lock_core::backend::{Attempt, Lock};
use lock_core::{Lease, LockError};
use lock_postgres::{
    PostgresAdvisoryLock, PostgresLock, PreparedStatementsUnsupported, TransactionPooler,
};
use lock_testkit::{PgBouncer, PostgresServer};

fn bouncer(server: &PostgresServer) -> PgBouncer {
    PgBouncer::start(server).expect("start pgbouncer")
}

/// A table-mode lock through `bouncer`, one pooled connection, listening on `server` directly.
fn through(bouncer: &PgBouncer, server: &PostgresServer, prepared: bool) -> PostgresLock {
    PostgresLock::builder()
        .url(bouncer.url())
        .listen_url(server.url())
        .prepared_statements(prepared)
        .pool_size(1)
        .statement_timeout(Duration::from_secs(2))
        .build()
        .expect("build lock")
}

/// Pins the server connection that is idle in the pooler now (the one the lock used last):
/// a transaction, left open until the returned client is dropped.
async fn pin_idle_server_connection(bouncer: &PgBouncer) -> (tokio_postgres::Client, i32) {
    let pinner = common::client(&bouncer.url()).await;
    pinner.batch_execute("BEGIN").await.expect("begin");
    let pid: i32 = pinner
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .expect("pid")
        .get(0);
    (pinner, pid)
}

/// A lease of the free `name` (30 s).
async fn acquired(lock: &impl Lock, name: &str) -> Lease {
    match lock
        .try_acquire(name, token(), Duration::from_secs(30))
        .await
        .expect("acquire")
    {
        Attempt::Acquired(lease) => lease,
        Attempt::Busy { .. } => panic!("{name} is free, yet busy"),
    }
}

/// The release of `lease`, which must fail within 10 s (no hang) with a non-retryable backend
/// error (trying again cannot help); the error's message and its source.
async fn refused_release(
    lock: &impl Lock,
    lease: &Lease,
) -> (String, Box<dyn std::error::Error + Send + Sync>) {
    let err = tokio::time::timeout(Duration::from_secs(10), lock.release(lease))
        .await
        .expect("an answer, not a hang")
        .expect_err("the release lands on another server connection");
    let text = err.to_string();
    match err {
        LockError::Backend {
            retryable: false,
            source,
            ..
        } => (text, source),
        other => panic!("not a non-retryable backend error: {other}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prepared_statements_behind_a_transaction_pooler_give_the_typed_error() {
    let server = common::server();
    common::lock(&server).await; // migrates, directly
    let bouncer = bouncer(&server);
    let lock = through(&bouncer, &server, true);
    assert!(lock.prepared_statements(), "on by default");
    // One cycle prepares the acquire and the release on the one server connection there is.
    for round in 0..2 {
        let lease = acquired(&lock, "warm-up").await;
        assert!(
            lock.release(&lease).await.expect("release"),
            "round {round}"
        );
    }
    let lease = acquired(&lock, "job").await;
    let (_pinner, _) = pin_idle_server_connection(&bouncer).await;

    // The release goes to the other server connection, where its statement was never prepared.
    let (err, source) = refused_release(&lock, &lease).await;
    assert!(
        source
            .downcast_ref::<PreparedStatementsUnsupported>()
            .is_some(),
        "{err}"
    );
    assert!(
        err.contains("prepared_statements(false)"),
        "the message names the way out: {err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unprepared_statements_run_on_any_server_connection() {
    let server = common::server();
    common::lock(&server).await;
    let bouncer = bouncer(&server);
    let lock = through(&bouncer, &server, false);
    let lease = acquired(&lock, "job").await;
    let (_pinner, _) = pin_idle_server_connection(&bouncer).await;
    assert!(
        lock.release(&lease)
            .await
            .expect("released on the other server connection")
    );
    let admin = common::client(&server.url()).await;
    assert_eq!(common::held(&admin).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_advisory_mode_is_caught_behind_a_transaction_pooler() {
    let server = common::server();
    let bouncer = bouncer(&server);
    let lock = PostgresAdvisoryLock::builder()
        .url(bouncer.url())
        .statement_timeout(Duration::from_secs(2))
        .build()
        .expect("build");
    let lease = acquired(&lock, "job").await;
    let (_pinner, acquired_on) = pin_idle_server_connection(&bouncer).await;
    let (err, source) = refused_release(&lock, &lease).await;
    let pooler = source
        .downcast_ref::<TransactionPooler>()
        .unwrap_or_else(|| panic!("not TransactionPooler: {err}"));
    assert_eq!(pooler.acquired_on, acquired_on, "{err}");
    assert_ne!(pooler.now_on, acquired_on, "{err}");
}
