//! # An axum service whose handler is guarded by `#[distributed_lock]`
//!
//! `POST /orders/{id}/settle` settles one order: it reads the order's balance, works a while
//! (`--work-ms`), and writes the new balance to a ledger in the lock's store, through the
//! library's fence with the lease's fencing token (`ledger.rs`). The
//! handler carries `#[distributed_lock("order:{id}", locker = state.locker, ..)]`, with the
//! `Locker` taken from axum's `State`, so requests for one order run one at a time across every
//! process sharing the Redis, and requests for different orders run in parallel.
//!
//! `GET /orders/{id}` shows an order; `GET /metrics` serves the lock's metrics in Prometheus'
//! text format (`metrics-exporter-prometheus`): acquisitions and refusals per lock, wait and
//! hold time histograms, held locks, waiters, renewals, lost leases.
//!
//! It starts a throwaway `redis-server` (through `lock-testkit`) unless `--redis-url` (or
//! `REDIS_URL`) names one. With `--backend postgres` the locks live on PostgreSQL instead
//! (`PostgresLock`, the lease table created with `migrate`): a throwaway server (`initdb` in a
//! temporary directory) unless `--postgres-url` (or `DATABASE_URL`) names one. It prints `listening on http://ADDR` once it serves, and stops on Ctrl-C
//! or SIGTERM. Lock failures become HTTP responses through distlock's `IntoResponse` for
//! `LockError` (feature `axum`).
//!
//! ```text
//! cargo run --example axum_service --features axum
//! cargo run --example axum_service --features axum -- --listen 127.0.0.1:3000 --work-ms 25
//! REDIS_URL=redis://my-redis:6379/ cargo run --example axum_service --features axum
//! cargo run --example axum_service --features axum -- --backend postgres
//! curl -X POST http://127.0.0.1:3000/orders/7/settle
//! curl http://127.0.0.1:3000/metrics
//! bash examples/axum_service/load.sh     # concurrent requests on a few orders, then /metrics
//! ```
//!
//! Files: `main.rs` (options, start-up), `routes.rs` (the handlers), `ledger.rs` (the fenced
//! store), `error.rs` (errors as HTTP responses), `metrics.rs` (the Prometheus recorder).

mod error;
mod ledger;
mod metrics;
mod routes;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use clap::{Parser, ValueEnum};
use distlock::backend::Lock;
use distlock::{Locker, redis::RedisLock};
// `distlock::postgres::PostgresLock` with the `postgres` feature; the crate itself here, so that the
// example runs on PostgreSQL without that feature.
use lock_postgres::PostgresLock;
use lock_testkit::{PostgresServer, RedisServer};

use crate::ledger::Ledger;

/// The error type of the example's own plumbing.
type Error = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Where the locks live.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Backend {
    /// `RedisLock`.
    Redis,
    /// `PostgresLock` (a lease table, releases announced with LISTEN/NOTIFY).
    Postgres,
}

/// An axum service guarded by `#[distributed_lock]`, with Prometheus metrics on /metrics.
#[derive(Debug, Parser)]
struct Cli {
    /// Address to serve on (loopback by default; port 0 picks a free one).
    #[arg(long, default_value = "127.0.0.1:3000")]
    listen: SocketAddr,
    /// Where the locks live.
    #[arg(long, value_enum, default_value_t = Backend::Redis)]
    backend: Backend,
    /// Redis to lock on (with --backend redis); without it a throwaway redis-server is started.
    #[arg(long, value_name = "URL", visible_alias = "url", env = "REDIS_URL")]
    redis_url: Option<String>,
    /// PostgreSQL to lock on (with --backend postgres); without it a throwaway PostgreSQL is
    /// started. The lease table distlock_leases is created if it is missing.
    #[arg(long, value_name = "URL", env = "DATABASE_URL")]
    postgres_url: Option<String>,
    /// The lease of the locks, renewed every third of it while a request holds one, in
    /// milliseconds (short values make renewals visible on the dashboard).
    #[arg(long, default_value_t = 30_000)]
    lease_ms: u64,
    /// How long settling one order works while holding its lock, in milliseconds.
    #[arg(long, default_value_t = 25)]
    work_ms: u64,
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let cli = Cli::parse();
    let prometheus = metrics::install()?;
    // The throwaway servers come from the workspace's unpublished test kit, and are stopped by
    // PID when these are dropped; in your own project keep only the `Some(url)` arms (a URL of
    // your Redis or PostgreSQL).
    let mut _redis_server = None;
    let mut _postgres_server = None;
    let (locker, ledger) = match cli.backend {
        Backend::Redis => {
            let url = match &cli.redis_url {
                Some(url) => url.clone(),
                None => {
                    let server = RedisServer::start()?;
                    let url = server.url();
                    eprintln!("started redis-server on {url}");
                    _redis_server = Some(server);
                    url
                }
            };
            let lock = RedisLock::from_url(&url)?;
            let ledger = Ledger::redis(&lock, &url).await?;
            (locker(lock, &cli), ledger)
        }
        Backend::Postgres => {
            let url = match &cli.postgres_url {
                Some(url) => url.clone(),
                None => {
                    let server = PostgresServer::start()?;
                    let url = server.url();
                    eprintln!("started PostgreSQL on {url}");
                    _postgres_server = Some(server);
                    url
                }
            };
            let lock = PostgresLock::from_url(&url)?;
            // Creates the lease table if it is missing (or run `lock_postgres::MIGRATION`
            // through your own migrations).
            lock.migrate().await?;
            (locker(lock, &cli), Ledger::postgres(&url).await?)
        }
    };
    let state = routes::AppState {
        locker,
        ledger: Arc::new(ledger),
        work: Duration::from_millis(cli.work_ms),
        prometheus,
    };
    let listener = tokio::net::TcpListener::bind(cli.listen).await?;
    println!("listening on http://{}", listener.local_addr()?);
    axum::serve(listener, routes::router(state))
        // SIGTERM or Ctrl-C: the same signal the handlers' locks are tied to
        // (`stop_on_shutdown`), so their locks are released at once, not a lease later.
        .with_graceful_shutdown(distlock::shutdown())
        .await?;
    eprintln!("stopped");
    Ok(())
}

/// The service's `Locker` on `lock`, whichever backend it is: leases of `--lease-ms`.
fn locker(lock: impl Lock + 'static, cli: &Cli) -> Locker {
    Locker::builder(lock)
        .lease(Duration::from_millis(cli.lease_ms))
        .build()
}
