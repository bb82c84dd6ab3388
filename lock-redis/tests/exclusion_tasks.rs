//! 32 tasks on one name: a read-modify-write counter updated under the lock ends exact.

mod common;

use std::time::Duration;

use common::{locker_on, raw, server};
use futures::future::try_join_all;

const TASKS: usize = 32;
const ROUNDS: usize = 15;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tasks_on_one_name_exclude_each_other() {
    let server = server();
    // Four lockers (four connections), eight tasks each: contention within and across clients.
    let lockers: Vec<_> = (0..4).map(|_| locker_on(&server)).collect();
    let tasks = (0..TASKS).map(|i| {
        let locker = lockers[i % lockers.len()].clone();
        let url = server.url();
        tokio::spawn(async move {
            let mut conn = redis::Client::open(url)?
                .get_multiplexed_async_connection()
                .await?;
            for _ in 0..ROUNDS {
                let guard = locker
                    .lock("counter-lock")
                    .fixed_ttl(Duration::from_secs(5))
                    .wait(Duration::from_secs(30))
                    .await
                    .expect("acquire within the wait");
                // Deliberately not atomic: read, yield, write. Only the lock keeps it exact.
                let n: i64 = redis::cmd("GET")
                    .arg("counter")
                    .query_async::<Option<i64>>(&mut conn)
                    .await?
                    .unwrap_or(0);
                tokio::task::yield_now().await;
                redis::cmd("SET")
                    .arg("counter")
                    .arg(n + 1)
                    .query_async::<()>(&mut conn)
                    .await?;
                guard.release().await.expect("release");
            }
            Ok::<_, redis::RedisError>(())
        })
    });
    for outcome in try_join_all(tasks).await.expect("no task panicked") {
        outcome.expect("redis commands");
    }
    let mut conn = raw(&server).await;
    let total: i64 = redis::cmd("GET")
        .arg("counter")
        .query_async(&mut conn)
        .await
        .expect("GET");
    assert_eq!(
        total,
        i64::try_from(TASKS * ROUNDS).expect("small"),
        "lost updates: exclusion broke"
    );
    let left: i64 = redis::cmd("EXISTS")
        .arg("counter-lock")
        .query_async(&mut conn)
        .await
        .expect("EXISTS");
    assert_eq!(left, 0, "every guard released");
}
