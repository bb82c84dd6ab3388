//! Scripts flushed from the server (SCRIPT FLUSH, as after a restart or failover) are loaded
//! again transparently: every operation still succeeds.

use std::time::Duration;

use crate::common::{self, locker_on, raw, server};

#[tokio::test]
async fn operations_survive_script_flush() {
    let server = server();
    let locker = locker_on(&server);
    let mut conn = raw(&server).await;
    let flush = |conn: &mut redis::aio::MultiplexedConnection| {
        let mut conn = conn.clone();
        async move {
            redis::cmd("SCRIPT")
                .arg("FLUSH")
                .query_async::<()>(&mut conn)
                .await
                .expect("SCRIPT FLUSH");
        }
    };
    flush(&mut conn).await;
    let mut guard = locker.lock("a").await.expect("acquire after flush");
    flush(&mut conn).await;
    guard
        .extend(Duration::from_secs(20))
        .await
        .expect("extend after flush");
    flush(&mut conn).await;
    assert!(
        locker
            .lock("a")
            .try_acquire()
            .await
            .expect("busy answer after flush")
            .is_none()
    );
    flush(&mut conn).await;
    let before = common::command_calls(&conn, "script|load").await;
    guard.release().await.expect("release after flush");
    assert!(
        common::command_calls(&conn, "script|load").await > before,
        "the flushed script was loaded again on the same connection"
    );
}
