//! Typed errors: a server that is down, a wrong password, a missing table, bad names and TTLs.

use std::time::{Duration, Instant};

use lock_core::LockError;
use lock_core::backend::Lock;
use lock_mysql::{MissingTable, MysqlAdvisoryLock, MysqlLock};

use crate::common::token;

fn source_is<T: std::error::Error + 'static>(error: &LockError) -> bool {
    match error {
        LockError::Backend { source, .. } => source.downcast_ref::<T>().is_some(),
        _ => false,
    }
}

#[tokio::test]
async fn a_server_that_is_down_is_a_timely_retryable_error() {
    let port = lock_testkit::free_port();
    let url = format!("mysql://distlock:pw@127.0.0.1:{port}/distlock");
    let lock = MysqlLock::builder()
        .url(url.as_str())
        .connect_timeout(Duration::from_millis(500))
        .build()
        .expect("build");
    let started = Instant::now();
    let error = lock
        .try_acquire("down", token(), Duration::from_secs(5))
        .await
        .expect_err("no server");
    assert!(error.is_retryable(), "{error:?}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    let advisory = MysqlAdvisoryLock::from_url(&url).expect("build");
    assert!(advisory.ping().await.expect_err("no server").is_retryable());
}

#[tokio::test]
async fn a_wrong_password_is_not_retryable() {
    let db = crate::common::shared().await;
    let lock = crate::common::lock(&db.server.url_with_password("wrong"));
    let error = lock.ping().await.expect_err("wrong password");
    assert!(!error.is_retryable(), "{error:?}");
    assert!(error.to_string().contains("1045") || format!("{error:?}").contains("1045"));
}

#[tokio::test]
async fn a_missing_table_says_to_migrate() {
    let db = crate::common::shared().await;
    db.server
        .sql_as_root("CREATE DATABASE IF NOT EXISTS unmigrated")
        .expect("create database");
    let url = format!(
        "{}/unmigrated",
        db.server.url().rsplit_once('/').expect("path").0
    );
    let lock = crate::common::lock(&url);
    let error = lock
        .try_acquire("missing", token(), Duration::from_secs(5))
        .await
        .expect_err("no table");
    assert!(source_is::<MissingTable>(&error), "{error:?}");
    assert!(!error.is_retryable());
    assert!(error.to_string().contains("migrate"), "{error}");
}

#[tokio::test]
async fn bad_names_and_ttls_are_refused_before_anything_is_sent() {
    // Nothing listens on port 1: an error other than InvalidInput would mean something was sent.
    let url = "mysql://distlock:pw@127.0.0.1:1/distlock";
    let table = MysqlLock::from_url(url).expect("build");
    let advisory = MysqlAdvisoryLock::from_url(url).expect("build");
    let locks: [&dyn Lock; 2] = [&table, &advisory];
    for lock in locks {
        for (name, ttl) in [
            ("", Duration::from_secs(1)),
            ("ok", Duration::ZERO),
            (&*"x".repeat(2000), Duration::from_secs(1)),
        ] {
            let error = lock.try_acquire(name, token(), ttl).await.expect_err("bad");
            assert!(matches!(error, LockError::InvalidInput { .. }), "{error:?}");
        }
    }
    // A TTL whose wait_timeout would pass a year.
    let error = advisory
        .try_acquire("ok", token(), Duration::from_secs(400 * 24 * 3600))
        .await
        .expect_err("too long");
    assert!(matches!(error, LockError::InvalidInput { .. }), "{error:?}");
    assert!(matches!(
        MysqlLock::from_url("postgres://nope"),
        Err(LockError::InvalidInput { .. })
    ));
}
