//! Uncontended acquire + release cycles through a `Locker` on a throwaway PostgreSQL (started by
//! lock-testkit on a free loopback port): cycles per second, and the statements per cycle the
//! server ran, counted by `pg_stat_statements` (which PostgreSQL's packages ship).
//!
//! `cargo run --release -p lock-postgres --example cycles [CYCLES]` (default 2,000; the loop
//! also stops after 60 s).

use std::time::{Duration, Instant};

use lock_core::Locker;
use lock_postgres::PostgresLock;
use lock_testkit::PostgresServer;
use tokio_postgres::NoTls;

const TIME_CAP: Duration = Duration::from_secs(60);

/// Statements run on the lease table so far, by every connection.
async fn statements(client: &tokio_postgres::Client) -> Result<i64, tokio_postgres::Error> {
    let row = client
        .query_one(
            "SELECT coalesce(sum(calls), 0)::int8 FROM pg_stat_statements \
             WHERE query LIKE '%distlock_leases%' AND query NOT LIKE '%pg_stat_statements%'",
            &[],
        )
        .await?;
    Ok(row.get(0))
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cycles: u32 = std::env::args()
        .nth(1)
        .map(|n| n.parse())
        .transpose()?
        .unwrap_or(2_000);
    let server = PostgresServer::builder()
        .setting("shared_preload_libraries", "pg_stat_statements")
        .start()?;
    let lock = PostgresLock::from_url(&server.url())?;
    lock.migrate().await?;
    let locker = Locker::new(lock);
    let (client, connection) = server
        .url()
        .parse::<tokio_postgres::Config>()?
        .connect(NoTls)
        .await?;
    tokio::spawn(connection);
    client
        .batch_execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        .await?;

    // Warm up: the pool's connection, the row.
    locker.lock("bench").await?.release().await?;
    let before = statements(&client).await?;
    let started = Instant::now();
    let mut done = 0u32;
    while done < cycles && started.elapsed() < TIME_CAP {
        let guard = locker.lock("bench").await?;
        guard.release().await?;
        done += 1;
    }
    let elapsed = started.elapsed();
    let statements = statements(&client).await? - before;
    println!(
        "{done} cycles in {elapsed:.2?}: {:.0} cycles/s, {:.0} µs per cycle, {:.2} statements per cycle",
        f64::from(done) / elapsed.as_secs_f64(),
        elapsed.as_secs_f64() * 1e6 / f64::from(done),
        statements as f64 / f64::from(done),
    );
    Ok(())
}
