//! Local handoff on Redis: a guard released while another task of the process waits hands the
//! lock over with one script (compare, new token and TTL, new fencing token), announcing
//! nothing; fencing tokens keep increasing and exclusion holds.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use lock_core::Locker;
use lock_redis::RedisLock;

use crate::common::{command_calls, get, lock_on, raw, server};

const LONG: Duration = Duration::from_secs(30);

/// Two tasks take turns on one name `rounds` times each; returns every grant's fencing token
/// in grant order.
async fn take_turns(locker: &Locker, rounds: usize) -> Vec<u64> {
    let fences = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for _ in 0..2 {
        let (locker, fences) = (locker.clone(), Arc::clone(&fences));
        tasks.push(tokio::spawn(async move {
            for _ in 0..rounds {
                let guard = locker.lock("turns").wait(LONG).await.expect("granted");
                fences.lock().expect("lock").push(guard.fencing_token());
                tokio::time::sleep(Duration::from_millis(2)).await;
                guard.release().await.expect("release");
            }
        }));
    }
    for task in tasks {
        task.await.expect("no panic");
    }
    Arc::try_unwrap(fences)
        .expect("tasks done")
        .into_inner()
        .expect("lock")
}

#[tokio::test]
async fn handoffs_are_one_script_and_fencing_tokens_keep_increasing() {
    let server = server();
    let locker = Locker::new(lock_on(&server));
    let mut conn = raw(&server).await;
    // Load the scripts (and subscribe) before counting.
    drop(locker.lock("turns").await.expect("free"));
    tokio::time::sleep(Duration::from_millis(50)).await;
    redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .exec_async(&mut conn)
        .await
        .expect("CONFIG RESETSTAT");

    let fences = take_turns(&locker, 10).await;
    assert_eq!(fences.len(), 20);
    assert!(
        fences.windows(2).all(|w| w[0] < w[1]),
        "fencing tokens strictly increase across handoffs: {fences:?}"
    );
    assert_eq!(get(&mut conn, "turns").await, None, "released at the end");
    let publishes = command_calls(&conn, "publish").await;
    let deletes = command_calls(&conn, "del").await;
    let times = command_calls(&conn, "time").await;
    assert_eq!(
        times, 20,
        "one fencing token per grant, handed over or acquired"
    );
    assert!(
        deletes < 20,
        "handoffs delete nothing: {deletes} deletions for 20 grants"
    );
    assert!(
        deletes >= 2,
        "but every ninth release in a row is plain: {deletes}"
    );
    assert_eq!(
        publishes, 0,
        "nobody waits in another process, so no release is announced"
    );
}

#[tokio::test]
async fn handoffs_work_without_fencing() {
    let server = server();
    let lock = RedisLock::builder()
        .url(server.url())
        .fencing(false)
        .build()
        .expect("config");
    let locker = Locker::new(lock);
    let mut conn = raw(&server).await;
    let fences = take_turns(&locker, 6).await;
    assert_eq!(fences, vec![0; 12], "no fencing tokens");
    assert_eq!(command_calls(&conn, "time").await, 0, "no clock read");
    assert_eq!(get(&mut conn, "turns").await, None, "released at the end");
    let counters: Vec<String> = redis::cmd("KEYS")
        .arg("*distlock-fence")
        .query_async(&mut conn)
        .await
        .expect("KEYS");
    assert!(counters.is_empty(), "no counter: {counters:?}");
}
