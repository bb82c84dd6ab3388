//! A holder paused past its lease (it makes no call while its TTL runs out) comes back after
//! another holder took the name: its extend and release say "not ours", and its late write,
//! fenced by the resource with the grant's token, is refused; the new holder's is accepted.

use std::time::Duration;

use lock_core::backend::{Attempt, Lock};
use lock_core::{Lease, Token};
use lock_mysql::MysqlLock;
use sqlx::mysql::MySqlPool;

const TTL: Duration = Duration::from_millis(800);

/// The fenced write: the resource keeps the largest token it accepted, and takes a write only
/// with a token at least that large (`WHERE` is evaluated before `SET`). Whether it took it.
async fn fenced_write(pool: &MySqlPool, value: &str, fence: u64) -> bool {
    sqlx::query("UPDATE fenced_resource SET value = ?, fence = ? WHERE id = 1 AND fence <= ?")
        .bind(value)
        .bind(fence)
        .bind(fence)
        .execute(pool)
        .await
        .expect("write")
        .rows_affected()
        == 1
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
         (id INT PRIMARY KEY, value VARCHAR(64) NOT NULL, fence BIGINT UNSIGNED NOT NULL)",
    )
    .execute(&pool)
    .await
    .expect("create");
    sqlx::query("INSERT IGNORE INTO fenced_resource VALUES (1, 'none', 0)")
        .execute(&pool)
        .await
        .expect("insert");

    let name = "fenced-write";
    let first = take(&paused, name).await;
    assert!(fenced_write(&pool, "first", first.fencing_token()).await);
    // Paused: nothing is sent while its TTL runs out; the other holder takes the name.
    let second = take(&other, name).await;
    assert!(second.fencing_token() > first.fencing_token());
    assert!(fenced_write(&pool, "second", second.fencing_token()).await);

    // The paused holder comes back.
    assert!(
        !fenced_write(&pool, "late", first.fencing_token()).await,
        "the late write was accepted"
    );
    assert_eq!(paused.extend(&first, TTL).await.expect("extend"), None);
    assert!(!paused.release(&first).await.expect("release"));
    let value: String = sqlx::query_scalar("SELECT value FROM fenced_resource WHERE id = 1")
        .fetch_one(&pool)
        .await
        .expect("read");
    assert_eq!(value, "second");
    assert!(other.release(&second).await.expect("release"));
}
