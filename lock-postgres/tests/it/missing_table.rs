//! Before the migration, lock operations fail with an error that says to run it.

use crate::common;

use std::error::Error as _;
use std::time::Duration;

use lock_core::backend::{Attempt, Lock};
use lock_core::{LockError, Token};
use lock_postgres::MissingTable;

/// `err` is the non-retryable error of a missing (or older) schema, saying to migrate.
fn says_to_migrate(err: &LockError) {
    let LockError::Backend {
        retryable: false,
        source,
        ..
    } = err
    else {
        panic!("{err}");
    };
    assert!(source.downcast_ref::<MissingTable>().is_some(), "{source}");
    assert!(err.to_string().contains("migrate()"), "{err}");
}

#[tokio::test]
async fn a_missing_table_says_to_run_the_migration() {
    let server = common::server();
    let lock = common::unmigrated(&server);
    let err = lock
        .try_acquire(
            "job",
            Token::generate().expect("token"),
            Duration::from_secs(5),
        )
        .await
        .expect_err("no table");
    says_to_migrate(&err);
    assert!(err.source().is_some());

    lock.migrate().await.expect("migrate");
    lock.migrate().await.expect("the migration is idempotent");
    assert!(matches!(
        lock.try_acquire(
            "job",
            Token::generate().expect("token"),
            Duration::from_secs(5)
        )
        .await
        .expect("after the migration"),
        Attempt::Acquired(_)
    ));
}

/// A database migrated to version 1 (the lease table alone, as released before the other
/// kinds): the mutex works, the other kinds say to migrate, and the migration upgrades it in
/// place. A lease held across the upgrade stays held and renews, and every kind works after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_1_database_is_upgraded_in_place() {
    const VERSION_1: &str = "CREATE TABLE IF NOT EXISTS distlock_leases (
        name          text        PRIMARY KEY,
        token         text,
        fencing_token bigint      NOT NULL,
        expires_at    timestamptz NOT NULL
    )";
    let server = common::server();
    let client = common::client(&server.url()).await;
    client.batch_execute(VERSION_1).await.expect("version 1");
    let lock = common::unmigrated(&server);
    let locker = lock_core::Locker::new(common::unmigrated(&server));

    let held = locker
        .lock("job")
        .lease(Duration::from_secs(2))
        .await
        .expect("the mutex works on version 1");
    let fence = held.fencing_token();
    for refused in [
        locker.read("doc").try_acquire().await.map(drop),
        locker.semaphore("pool", 2).try_acquire().await.map(drop),
        locker.fair("queue").try_acquire().await.map(drop),
    ] {
        says_to_migrate(&refused.expect_err("no function for this kind on version 1"));
    }

    lock.migrate().await.expect("upgrade to version 2");
    let version: i32 = client
        .query_one("SELECT version FROM distlock_schema", &[])
        .await
        .expect("the schema's version")
        .get(0);
    assert_eq!(
        u32::try_from(version).ok(),
        Some(lock_postgres::SCHEMA_VERSION)
    );
    assert_eq!(
        common::held(&client).await,
        1,
        "the lease survives the upgrade"
    );
    assert!(
        locker
            .lock("job")
            .try_acquire()
            .await
            .expect("try")
            .is_none(),
        "the name is still held"
    );
    // Past its first lease (2 s), the guard is still valid: its renewal works on version 2.
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    assert!(held.is_held(), "renewed across the upgrade");
    held.release().await.expect("released");

    let reader = locker.read("doc").await.expect("read after the upgrade");
    assert!(reader.fencing_token() > 0);
    reader.release().await.expect("read released");
    let permits = locker
        .semaphore("pool", 2)
        .await
        .expect("semaphore after the upgrade");
    permits.release().await.expect("permit released");
    let fair = locker.fair("job").await.expect("fair after the upgrade");
    assert!(
        fair.fencing_token() > fence,
        "the fair lock is the mutex: its tokens go on"
    );
    fair.release().await.expect("fair released");
}
