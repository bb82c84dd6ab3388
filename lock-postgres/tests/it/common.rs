//! Shared by the integration tests: a throwaway server, a migrated lock on it, a raw client.

#![allow(dead_code, unreachable_pub)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use lock_core::{Guard, Locker, Token};
use lock_postgres::PostgresLock;
use lock_testkit::PostgresServer;
use tokio_postgres::NoTls;

/// A fresh random token.
pub fn token() -> Token {
    Token::generate().expect("token")
}

pub fn server() -> PostgresServer {
    PostgresServer::start().expect("start postgres")
}

/// A lock on `server` with short timeouts (no migration).
pub fn unmigrated(server: &PostgresServer) -> PostgresLock {
    unmigrated_at(server.url())
}

/// A lock on the server at `url` with short timeouts (no migration).
pub fn unmigrated_at(url: String) -> PostgresLock {
    PostgresLock::builder()
        .url(url)
        .connect_timeout(Duration::from_secs(2))
        .statement_timeout(Duration::from_secs(2))
        .build()
        .expect("build lock")
}

/// A lock on `server`, with the lease table created.
pub async fn lock(server: &PostgresServer) -> PostgresLock {
    let lock = unmigrated(server);
    lock.migrate().await.expect("migrate");
    lock
}

/// A plain client on `url`, its connection driven on the current runtime.
pub async fn client(url: &str) -> tokio_postgres::Client {
    let mut config: tokio_postgres::Config = url.parse().expect("url");
    config.connect_timeout(Duration::from_secs(5));
    let (client, connection) = config.connect(NoTls).await.expect("connect");
    tokio::spawn(connection);
    client
}

/// How many leases are held right now (token set, not expired), by the server's clock.
pub async fn held(client: &tokio_postgres::Client) -> i64 {
    client
        .query_one(
            "SELECT count(*) FROM distlock_leases \
             WHERE token IS NOT NULL AND expires_at > clock_timestamp()",
            &[],
        )
        .await
        .expect("count held leases")
        .get(0)
}

/// An advisory-mode lock on `server` with short timeouts.
pub fn advisory(server: &PostgresServer) -> lock_postgres::PostgresAdvisoryLock {
    lock_postgres::PostgresAdvisoryLock::builder()
        .url(server.url())
        .connect_timeout(Duration::from_secs(2))
        .statement_timeout(Duration::from_secs(2))
        .build()
        .expect("build advisory lock")
}

/// How many advisory locks any session holds right now.
pub async fn advisory_held(client: &tokio_postgres::Client) -> i64 {
    client
        .query_one(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted",
            &[],
        )
        .await
        .expect("count advisory locks")
        .get(0)
}

/// Polls (bounded: 5 s) until no session holds an advisory lock; the count last seen.
pub async fn until_no_advisory_held(client: &tokio_postgres::Client) -> i64 {
    let mut held = advisory_held(client).await;
    for _ in 0..100 {
        if held == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        held = advisory_held(client).await;
    }
    held
}

/// Tasks behind `lockers` (three tasks each, as each process would have) take `rounds` turns
/// each at a read-modify-write counter that yields between its read and its write: no two
/// hold "counter" at once, and the counter stays exact. `check` looks at every guard while it
/// is held.
pub async fn counter_stays_exact(lockers: Vec<Locker>, rounds: u64, check: fn(&Guard)) {
    const TASKS_PER_LOCKER: usize = 3;
    let counter = Arc::new(AtomicU64::new(0));
    let inside = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    let lockers_count = lockers.len();
    for locker in lockers {
        for _ in 0..TASKS_PER_LOCKER {
            let (locker, counter, inside) =
                (locker.clone(), Arc::clone(&counter), Arc::clone(&inside));
            tasks.push(tokio::spawn(async move {
                for _ in 0..rounds {
                    let guard = locker
                        .lock("counter")
                        .wait(Duration::from_secs(60))
                        .await
                        .expect("acquired");
                    check(&guard);
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
    let total = u64::try_from(lockers_count * TASKS_PER_LOCKER).expect("small") * rounds;
    assert_eq!(counter.load(Ordering::SeqCst), total);
}
