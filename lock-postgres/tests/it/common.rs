//! Shared by the integration tests: a throwaway server, a migrated lock on it, a raw client.

#![allow(dead_code, unreachable_pub)]

use std::time::Duration;

use lock_postgres::PostgresLock;
use lock_testkit::PostgresServer;
use tokio_postgres::NoTls;

pub fn server() -> PostgresServer {
    PostgresServer::start().expect("start postgres")
}

/// A lock on `server` with short timeouts (no migration).
pub fn unmigrated(server: &PostgresServer) -> PostgresLock {
    PostgresLock::builder()
        .url(server.url())
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
