//! Tasks behind four lockers (four `PostgresLock`s, as four processes would have) take turns:
//! a read-modify-write counter that yields between its read and its write stays exact.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use lock_core::Locker;

const LOCKERS: usize = 4;
const TASKS_PER_LOCKER: usize = 3;
const ROUNDS: u64 = 15;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_counter_updated_under_the_lock_stays_exact() {
    let server = common::server();
    let counter = Arc::new(AtomicU64::new(0));
    let inside = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for _ in 0..LOCKERS {
        let locker = Locker::new(common::lock(&server).await);
        for _ in 0..TASKS_PER_LOCKER {
            let (locker, counter, inside) =
                (locker.clone(), Arc::clone(&counter), Arc::clone(&inside));
            tasks.push(tokio::spawn(async move {
                for _ in 0..ROUNDS {
                    let guard = locker
                        .lock("counter")
                        .wait(Duration::from_secs(60))
                        .await
                        .expect("acquired");
                    assert_eq!(
                        inside.fetch_add(1, Ordering::SeqCst),
                        0,
                        "two holders at once"
                    );
                    let seen = counter.load(Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    counter.store(seen + 1, Ordering::SeqCst);
                    inside.fetch_sub(1, Ordering::SeqCst);
                    guard.release().await.expect("still ours");
                }
            }));
        }
    }
    for task in tasks {
        task.await.expect("no panic");
    }
    let total = u64::try_from(LOCKERS * TASKS_PER_LOCKER).expect("small") * ROUNDS;
    assert_eq!(counter.load(Ordering::SeqCst), total);
    let client = common::client(&server.url()).await;
    assert_eq!(common::held(&client).await, 0, "a lease was left behind");
}
