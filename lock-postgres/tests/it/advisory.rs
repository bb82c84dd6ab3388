//! The advisory mode (`PostgresAdvisoryLock`) through a `Locker`: exclusion among tasks, a
//! killed session is a lost lease, a stalled holder loses its session, cancelled acquires
//! leave nothing, faults give typed errors in bounded time.

use crate::common::{self, token};

use std::time::{Duration, Instant};

use lock_core::backend::{Attempt, Lock};
use lock_core::{LockError, Locker, TimeoutPhase};
use lock_postgres::{PostgresAdvisoryLock, advisory_key};
use lock_testkit::{FaultProxy, PostgresServer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_counter_updated_under_the_lock_stays_exact() {
    let server = common::server();
    let lockers = (0..4)
        .map(|_| Locker::new(common::advisory(&server)))
        .collect();
    // The advisory mode does not fence.
    common::counter_stays_exact(lockers, 10, |guard| assert_eq!(guard.fencing_token(), 0)).await;
    let client = common::client(&server.url()).await;
    assert_eq!(
        common::advisory_held(&client).await,
        0,
        "a lock was left behind"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminated_session_is_a_lost_lease_and_release_says_not_owned() {
    let server = common::server();
    let locker = Locker::new(common::advisory(&server));
    let guard = locker
        .lock("job")
        .lease(Duration::from_secs(2))
        .try_acquire()
        .await
        .expect("try")
        .expect("free");
    let admin = common::client(&server.url()).await;
    let key = advisory_key("job");
    // A bigint key is stored as classid = high 32 bits, objid = low 32 bits, objsubid = 1.
    let killed: i64 = admin
        .query_one(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_locks \
             WHERE locktype = 'advisory' AND granted AND objsubid = 1 \
             AND ((classid::int8 << 32) | objid::int8) = $1",
            &[&key],
        )
        .await
        .expect("terminate")
        .get(0);
    assert_eq!(killed, 1, "no session held the key of \"job\"");

    tokio::time::timeout(Duration::from_secs(5), guard.lost())
        .await
        .expect("lost() fired at the next heartbeat");
    let err = guard.release().await.expect_err("not ours any more");
    assert!(matches!(err, LockError::NotOwned { .. }), "{err}");
    assert_eq!(common::until_no_advisory_held(&admin).await, 0);
    locker
        .lock("job")
        .try_acquire()
        .await
        .expect("try")
        .expect("free again")
        .release()
        .await
        .expect("ours");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_that_stops_heartbeating_loses_its_session_and_lock() {
    let server = common::server();
    let lock = PostgresAdvisoryLock::builder()
        .url(server.url())
        .statement_timeout(Duration::from_millis(500))
        .build()
        .expect("build");
    // A released lease's connection goes back to the pool (the only one there) with
    // idle_session_timeout reset, so the server does not end it while it idles there.
    let ttl = Duration::from_secs(1);
    let Attempt::Acquired(first) = lock.try_acquire("a", token(), ttl).await.expect("try") else {
        panic!("busy");
    };
    assert!(lock.release(&first).await.expect("release"));
    assert_eq!(
        lock.pool().status().size,
        1,
        "the connection was not pooled"
    );
    let pooled = lock.pool().get().await.expect("pooled");
    let idle: String = pooled
        .query_one("SHOW idle_session_timeout", &[])
        .await
        .expect("show")
        .get(0);
    assert_eq!(
        idle, "0",
        "a pooled connection kept the lease's idle timeout"
    );
    drop(pooled);
    let Attempt::Acquired(stalled) = lock.try_acquire("job", token(), ttl).await.expect("try")
    else {
        panic!("busy");
    };
    let admin = common::client(&server.url()).await;
    assert_eq!(common::advisory_held(&admin).await, 1);

    // No heartbeat: after TTL + statement timeout (1.5 s) of idleness, the server ends it.
    let started = Instant::now();
    let free = loop {
        let got: bool = admin
            .query_one("SELECT pg_try_advisory_lock($1)", &[&advisory_key("job")])
            .await
            .expect("try")
            .get(0);
        if got || started.elapsed() > Duration::from_secs(10) {
            break got;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(free, "the stalled session kept its lock");
    assert!(
        started.elapsed() >= Duration::from_millis(1000),
        "freed before the lease ran out: {:?}",
        started.elapsed()
    );
    assert_eq!(lock.extend(&stalled, ttl).await.expect("heartbeat"), None);
    assert!(!lock.release(&stalled).await.expect("release"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquires_dropped_at_any_point_leave_nothing() {
    let server = common::server();
    let locker = Locker::new(common::advisory(&server));
    for step in 0..40u64 {
        let _ = tokio::time::timeout(
            Duration::from_micros(step * 150),
            locker.lock("job").lease(Duration::from_secs(60)).acquire(),
        )
        .await;
    }
    let admin = common::client(&server.url()).await;
    assert_eq!(
        common::until_no_advisory_held(&admin).await,
        0,
        "a dropped acquire's lock stayed"
    );
    locker
        .lock("job")
        .try_acquire()
        .await
        .expect("try")
        .expect("free")
        .release()
        .await
        .expect("ours");
}

#[tokio::test]
async fn a_stopped_server_gives_retryable_errors_in_bounded_time() {
    let mut server = common::server();
    let lock = PostgresAdvisoryLock::builder()
        .url(server.url())
        .connect_timeout(Duration::from_secs(1))
        .statement_timeout(Duration::from_secs(1))
        .build()
        .expect("build");
    lock.ping().await.expect("up, and 14 or later");
    let ttl = Duration::from_secs(10);
    let Attempt::Acquired(lease) = lock.try_acquire("job", token(), ttl).await.expect("up") else {
        panic!("busy");
    };
    server.stop();
    let started = Instant::now();
    let err = lock
        .try_acquire("other", token(), ttl)
        .await
        .expect_err("down");
    assert!(err.is_retryable(), "{err}");
    assert!(
        matches!(err, LockError::Backend { .. } | LockError::Timeout { .. }),
        "{err}"
    );
    assert!(lock.ping().await.expect_err("down").is_retryable());
    // The held session died with the server: the lease is not ours any more.
    assert_eq!(lock.extend(&lease, ttl).await.expect("heartbeat"), None);
    assert!(!lock.release(&lease).await.expect("release"));
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn a_wrong_password_is_a_non_retryable_backend_error() {
    let server = PostgresServer::builder()
        .password("right")
        .start()
        .expect("start postgres");
    common::advisory(&server)
        .ping()
        .await
        .expect("the right password works");
    let wrong = PostgresAdvisoryLock::builder()
        .url(server.url_with_password("wrong"))
        .build()
        .expect("build");
    let started = Instant::now();
    let err = wrong
        .try_acquire("job", token(), Duration::from_secs(5))
        .await
        .expect_err("refused");
    assert!(
        matches!(
            err,
            LockError::Backend {
                retryable: false,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("password"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn a_ttl_beyond_the_idle_timeout_range_is_invalid_input() {
    let server = common::server();
    let lock = common::advisory(&server);
    let err = lock
        .try_acquire("job", token(), Duration::from_secs(30 * 24 * 3600))
        .await
        .expect_err("too long");
    assert!(matches!(err, LockError::InvalidInput { .. }), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_stops_answering_gives_timeouts() {
    const LIMIT: Duration = Duration::from_secs(1);
    let server = common::server();
    let proxy = FaultProxy::start(server.addr()).expect("proxy");
    let lock = PostgresAdvisoryLock::builder()
        .url(format!(
            "postgres://postgres@127.0.0.1:{}/postgres",
            proxy.addr().port()
        ))
        .connect_timeout(LIMIT)
        .statement_timeout(LIMIT)
        .build()
        .expect("build");
    let ttl = Duration::from_secs(30);
    let Attempt::Acquired(lease) = lock.try_acquire("job", token(), ttl).await.expect("up") else {
        panic!("busy");
    };

    proxy.partition();
    let started = Instant::now();
    // The held connection's heartbeat gets no reply: a Command timeout, the lease kept.
    let err = lock.extend(&lease, ttl).await.expect_err("partitioned");
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
    // A new attempt needs a new connection: a Connect timeout.
    let err = lock
        .try_acquire("other", token(), ttl)
        .await
        .expect_err("partitioned");
    assert!(
        matches!(err, LockError::Timeout { .. }) && err.is_retryable(),
        "{err}"
    );
    assert!(
        started.elapsed() < LIMIT * 10,
        "took {:?}",
        started.elapsed()
    );

    proxy.heal();
    let mut back = false;
    for _ in 0..50 {
        if lock.ping().await.is_ok() {
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
