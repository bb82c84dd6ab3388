//! 16 tasks over four Redlock clients on five nodes: a read-modify-write counter updated under
//! the lock ends exact, and no two tasks are ever inside at once.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::servers::Nodes;
use futures::future::try_join_all;
use lock_core::Locker;

const TASKS: usize = 16;
const ROUNDS: usize = 10;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tasks_on_one_name_exclude_each_other() {
    let nodes = Nodes::start(5);
    // Four clients (each with its own connections to the five nodes), four tasks each.
    let lockers: Vec<_> = (0..4).map(|_| Locker::new(nodes.redlock())).collect();
    let inside = Arc::new(AtomicUsize::new(0));
    let counter_url = nodes.url(0);
    let tasks = (0..TASKS).map(|i| {
        let locker = lockers[i % lockers.len()].clone();
        let (inside, url) = (Arc::clone(&inside), counter_url.clone());
        tokio::spawn(async move {
            let mut conn = redis::Client::open(url)?
                .get_multiplexed_async_connection()
                .await?;
            for _ in 0..ROUNDS {
                let guard = locker
                    .lock("counter-lock")
                    .fixed_ttl(Duration::from_secs(5))
                    .wait(Duration::from_secs(60))
                    .await
                    .expect("acquire within the wait");
                assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two holders");
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
                inside.fetch_sub(1, Ordering::SeqCst);
                guard.release().await.expect("release");
            }
            Ok::<_, redis::RedisError>(())
        })
    });
    for outcome in try_join_all(tasks).await.expect("no task panicked") {
        outcome.expect("redis commands");
    }
    let total: Option<String> = nodes.get(0, "counter").await;
    assert_eq!(
        total.as_deref(),
        Some((TASKS * ROUNDS).to_string().as_str()),
        "lost updates: exclusion broke"
    );
    assert!(
        nodes.wait_gone(&[0, 1, 2, 3, 4], "counter-lock").await,
        "every guard released on every node"
    );
}
