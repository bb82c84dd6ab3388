//! A holder paused past its lease (it makes no call while its TTL runs out) comes back after
//! another holder took the name: its extend and release say "not ours", and its late write,
//! fenced by `distlock_fence` in the write's transaction, is refused with `LockError::Fenced`;
//! the new holder's is accepted, and so is its second write with the same token.

use std::time::Duration;

use lock_core::backend::{Attempt, Lock};
use lock_core::{Fence, Lease, LockError, Token};
use lock_mysql::MysqlLock;
use sqlx::mysql::MySqlPool;

const TTL: Duration = Duration::from_millis(800);

/// The fenced write: `distlock_fence(resource, token)` first, then the write, in one
/// transaction; committed when the fence admits it, rolled back when it refuses.
async fn fenced_write(pool: &MySqlPool, value: &str, token: u64) -> Result<(), LockError> {
    let mut tx = pool.begin().await.expect("begin");
    lock_mysql::fence(&mut tx, &Fence::new("fenced_resource:1", token)).await?;
    sqlx::query("UPDATE fenced_resource SET value = ? WHERE id = 1")
        .bind(value)
        .execute(&mut *tx)
        .await
        .expect("write");
    tx.commit().await.expect("commit");
    Ok(())
}

/// Tries `name` until it is granted, bounded (the holder's TTL must run out first).
async fn take(lock: &MysqlLock, name: &str) -> Lease {
    for _ in 0..100 {
        let token = Token::generate().expect("token");
        if let Attempt::Acquired(lease) = lock.try_acquire(name, token, TTL).await.expect("try") {
            return lease;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{name} was never granted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_write_of_a_paused_holder_is_refused() {
    let db = crate::common::shared().await;
    let url = db.server.url();
    let (paused, other) = (crate::common::lock(&url), crate::common::lock(&url));
    let pool = MySqlPool::connect(&url).await.expect("connect");
    sqlx::query(
        "CREATE TABLE IF NOT EXISTS fenced_resource \
         (id INT PRIMARY KEY, value VARCHAR(64) NOT NULL)",
    )
    .execute(&pool)
    .await
    .expect("create");
    sqlx::query("INSERT IGNORE INTO fenced_resource VALUES (1, 'none')")
        .execute(&pool)
        .await
        .expect("insert");

    let name = "fenced-write";
    let first = take(&paused, name).await;
    fenced_write(&pool, "first", first.fencing_token())
        .await
        .expect("the first holder's write");
    // Paused: nothing is sent while its TTL runs out; the other holder takes the name.
    let second = take(&other, name).await;
    assert!(second.fencing_token() > first.fencing_token());
    fenced_write(&pool, "second", second.fencing_token())
        .await
        .expect("the successor's write");
    fenced_write(&pool, "second again", second.fencing_token())
        .await
        .expect("an equal token is accepted");

    // The paused holder comes back.
    let late = fenced_write(&pool, "late", first.fencing_token()).await;
    match late {
        Err(LockError::Fenced {
            resource,
            token,
            current,
        }) => {
            assert_eq!(resource, "fenced_resource:1");
            assert_eq!(token, first.fencing_token());
            assert_eq!(
                current,
                second.fencing_token(),
                "the refusal names the record"
            );
        }
        other => panic!("the late write was not fenced: {other:?}"),
    }
    assert_eq!(paused.extend(&first, TTL).await.expect("extend"), None);
    assert!(!paused.release(&first).await.expect("release"));
    let value: String = sqlx::query_scalar("SELECT value FROM fenced_resource WHERE id = 1")
        .fetch_one(&pool)
        .await
        .expect("read");
    assert_eq!(value, "second again");
    assert!(other.release(&second).await.expect("release"));
}

/// The record's row stays locked until the fencing transaction ends: a second fence of the
/// resource waits for it (here past the server's lock wait timeout of 1 s, and is then
/// refused by the server), and goes through once the first commits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_record_is_locked_until_the_transaction_ends() {
    let db = crate::common::shared().await;
    let pool = MySqlPool::connect(&db.server.url()).await.expect("connect");
    let fence = Fence::new("fenced_resource:locked", 10);
    let mut first = pool.begin().await.expect("begin");
    lock_mysql::fence(&mut first, &fence)
        .await
        .expect("admitted");
    let mut second = pool.begin().await.expect("begin");
    sqlx::query("SET SESSION innodb_lock_wait_timeout = 1")
        .execute(&mut *second)
        .await
        .expect("set");
    let waited = lock_mysql::fence(&mut second, &fence).await;
    assert!(
        matches!(
            waited,
            Err(LockError::Backend {
                retryable: true,
                ..
            })
        ),
        "a second fence did not wait for the first transaction: {waited:?}"
    );
    second.rollback().await.expect("rollback");
    first.commit().await.expect("commit");
    let mut third = pool.begin().await.expect("begin");
    lock_mysql::fence(&mut third, &fence)
        .await
        .expect("admitted after the first committed");
    third.commit().await.expect("commit");
}

/// Before the migration the fence says what to run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_schema_the_fence_names_the_migration() {
    let db = crate::common::shared().await;
    let pool = MySqlPool::connect(&db.server.url()).await.expect("connect");
    sqlx::query("CREATE DATABASE IF NOT EXISTS distlock_unmigrated")
        .execute(&pool)
        .await
        .expect("create database");
    let mut conn = pool.acquire().await.expect("connection");
    sqlx::query("USE distlock_unmigrated")
        .execute(&mut *conn)
        .await
        .expect("use");
    let refused = lock_mysql::fence(&mut conn, &Fence::new("r", 1)).await;
    let Err(LockError::Backend {
        retryable: false,
        source,
        ..
    }) = refused
    else {
        panic!("not a missing schema: {refused:?}");
    };
    let message = source.to_string();
    assert!(message.contains("distlock migrate"), "{message}");
    assert!(message.contains("MysqlLock::migrate()"), "{message}");
}
