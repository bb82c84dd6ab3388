//! Leader election, measured on throwaway servers the example starts itself (lock-testkit, by
//! PID): failover time, observers' lag, and the cost of idle leaderships.
//!
//! `cargo run --release -p distlock-bench --example election -- [kills] [elections]`
//! (defaults 20 and 1,000):
//!
//! - **failover**, on Redis and on PostgreSQL's lease table: a leader "crashes" (its lease is
//!   leaked: no renewal, no release, as after `kill -9`) while a second candidate (its own
//!   client, as another process) waits in `campaign()`; measured from the crash to the moment
//!   the second candidate's `campaign()` returns. Lease 1 s, so failover ≈ the lease left
//!   after the last renewal plus the waiter's wake-up.
//! - **observer lag**, on PostgreSQL (Redis has no holder descriptions yet): from a
//!   candidate's `campaign()` returning to another client's `observe()`, running all along in
//!   a task of its own, yielding that term; default poll interval (250 ms), `NOTIFY` wake-ups
//!   on releases (a new grant is announced by no backend, so it is seen at the next poll).
//! - **idle cost**, on Redis: `elections` leaderships (one name each) held for 3 lease periods
//!   (lease 3 s): server commands per election and lease period (`INFO commandstats`), and this
//!   process's CPU time (`/proc/self/stat`) per second.
//!
//! Prints the figures; no assertion (speed is measured here, never in tests).

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use lock_core::{Locker, LockerBuilder};
use lock_postgres::PostgresLock;
use lock_redis::RedisLock;
use lock_testkit::{PostgresServer, RedisServer};
use tokio::time::Instant;

const LEASE: Duration = Duration::from_secs(1);

/// The `p`-th percentile (nearest rank, `p` in percent) of `sorted`.
fn percentile(sorted: &[Duration], p: usize) -> Duration {
    let i = ((sorted.len() - 1) * p).div_ceil(100);
    sorted[i.min(sorted.len() - 1)]
}

fn report(what: &str, mut samples: Vec<Duration>) {
    samples.sort();
    println!(
        "{what}: n={} p50={:?} p99={:?} max={:?}",
        samples.len(),
        percentile(&samples, 50),
        percentile(&samples, 99),
        samples.last().copied().unwrap_or_default()
    );
}

/// Failover times over `kills` crashes of the leader, with two candidates from `locker()`.
async fn failover(kills: usize, locker: impl Fn() -> Locker) -> Result<Vec<Duration>, String> {
    let (a, b) = (locker(), locker());
    let mut samples = Vec::with_capacity(kills);
    for round in 0..kills {
        let name = format!("failover:{round}");
        let leader = a.elect(name.as_str()).lease(LEASE).campaign().await;
        let leader = leader.map_err(|e| e.to_string())?;
        let candidate = b.elect(name.as_str()).lease(LEASE);
        let waiting = tokio::spawn(async move { candidate.campaign().await });
        // Crash at a random point of the renewal period.
        tokio::time::sleep(Duration::from_millis(fastrand::u64(
            0..u64::try_from(LEASE.as_millis() / 3).unwrap_or(1),
        )))
        .await;
        let crashed = Instant::now();
        let old_term = leader.leak().fencing_token();
        let next = waiting.await.map_err(|e| e.to_string())?;
        let next = next.map_err(|e| e.to_string())?;
        samples.push(crashed.elapsed());
        assert!(next.term() > old_term, "terms grow");
        next.resign().await.map_err(|e| e.to_string())?;
    }
    Ok(samples)
}

/// Observer lag over `rounds` terms: the observer runs in a task of its own (as another
/// process would), stamping each term when its stream yields it.
async fn observer_lag(rounds: usize, locker: impl Fn() -> Locker) -> Result<Vec<Duration>, String> {
    let (candidate, observer) = (locker(), locker());
    let (seen_tx, mut seen) = tokio::sync::mpsc::unbounded_channel();
    let observing = tokio::spawn(async move {
        let mut changes = Box::pin(observer.elect("observed").observe());
        while let Some(change) = changes.next().await {
            if let Ok(Some(leader)) = change {
                let _ = seen_tx.send((leader.term(), Instant::now()));
            }
        }
    });
    tokio::time::sleep(Duration::from_millis(300)).await; // subscribed, first read done
    let mut samples = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let leadership = candidate
            .elect("observed")
            .lease(LEASE)
            .campaign()
            .await
            .map_err(|e| e.to_string())?;
        let elected = Instant::now();
        let at = loop {
            match seen.recv().await {
                Some((term, at)) if term == leadership.term() => break at,
                Some(_) => {}
                None => return Err("the observer ended".into()),
            }
        };
        samples.push(at.saturating_duration_since(elected));
        tokio::time::sleep(Duration::from_millis(fastrand::u64(50..150))).await;
        leadership.resign().await.map_err(|e| e.to_string())?;
        // Nobody leads for a moment; the observer tells it (not measured).
        tokio::time::sleep(Duration::from_millis(fastrand::u64(0..300))).await;
    }
    observing.abort();
    Ok(samples)
}

/// User + system CPU time of this process so far (`/proc/self/stat`, clock ticks of 10 ms).
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // Fields 14 and 15 of the line are utime and stime; `after` starts at field 3.
    Duration::from_millis((ticks(11) + ticks(12)) * 10)
}

/// Calls so far, from `INFO commandstats`: of every command (those run inside scripts too),
/// and of `EVALSHA` alone (one per renewal sent).
async fn commands(url: &str) -> Result<(u64, u64), String> {
    let client = redis::Client::open(url).map_err(|e| e.to_string())?;
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .map_err(|e| e.to_string())?;
    let text: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(&mut conn)
        .await
        .map_err(|e| e.to_string())?;
    let calls = |line: &str| -> Option<u64> {
        line.split("calls=").nth(1)?.split(',').next()?.parse().ok()
    };
    let lines = || {
        text.lines()
            .filter(|l| l.starts_with("cmdstat_") && !l.starts_with("cmdstat_info"))
    };
    let all = lines().filter_map(calls).sum();
    let evalsha = lines()
        .filter(|l| l.starts_with("cmdstat_evalsha:"))
        .filter_map(calls)
        .sum();
    Ok((all, evalsha))
}

/// `n` leaderships held idle for 3 lease periods of 3 s on one locker.
async fn idle_cost(n: usize, url: &str) -> Result<(), String> {
    let lease = Duration::from_secs(3);
    let lock = RedisLock::builder()
        .url(url)
        .build()
        .map_err(|e| e.to_string())?;
    let locker = LockerBuilder::from_arc(Arc::new(lock)).lease(lease).build();
    let mut held = Vec::with_capacity(n);
    for i in 0..n {
        let leadership = locker
            .elect(format!("idle:{i}"))
            .value(format!("replica-{i}"))
            .campaign()
            .await
            .map_err(|e| e.to_string())?;
        held.push(leadership);
    }
    let (commands_before, cpu_before, started) = (commands(url).await?, cpu_time(), Instant::now());
    tokio::time::sleep(lease * 3).await;
    let (commands_after, cpu_after, elapsed) =
        (commands(url).await?, cpu_time(), started.elapsed());
    let periods = elapsed.as_secs_f64() / lease.as_secs_f64();
    println!(
        "idle cost (Redis, {n} leaderships, lease {lease:?}, {elapsed:.1?}): {:.2} scripts \
         (EVALSHA, one per renewal) and {:.2} server commands in all per leadership per lease \
         period; client CPU {:?} in all = {:.2} % of one core",
        (commands_after.1 - commands_before.1) as f64 / n as f64 / periods,
        (commands_after.0 - commands_before.0) as f64 / n as f64 / periods,
        cpu_after - cpu_before,
        (cpu_after - cpu_before).as_secs_f64() / elapsed.as_secs_f64() * 100.0
    );
    let lost = held.iter().filter(|l| !l.is_leader()).count();
    println!("  leaderships lost while idle: {lost}");
    for leadership in held {
        leadership.resign().await.map_err(|e| e.to_string())?;
    }
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let kills = args.first().copied().unwrap_or(20);
    let elections = args.get(1).copied().unwrap_or(1_000);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let redis = RedisServer::start()?;
        let url = redis.url();
        let on_redis = || Locker::new(RedisLock::builder().url(url.as_str()).build().expect("url"));
        report(
            "failover (Redis, lease 1 s)",
            failover(kills, on_redis).await?,
        );
        idle_cost(elections, &url).await?;
        match PostgresServer::start() {
            Ok(postgres) => {
                let pg_url = postgres.url();
                PostgresLock::builder()
                    .url(pg_url.as_str())
                    .build()?
                    .migrate()
                    .await?;
                let on_pg = || {
                    Locker::new(
                        PostgresLock::builder()
                            .url(pg_url.as_str())
                            .build()
                            .expect("url"),
                    )
                };
                report(
                    "failover (PostgreSQL lease table, lease 1 s)",
                    failover(kills, on_pg).await?,
                );
                report(
                    "observer lag (PostgreSQL lease table)",
                    observer_lag(kills, on_pg).await?,
                );
            }
            Err(error) => println!("PostgreSQL not measured: {error}"),
        }
        Ok::<_, Box<dyn std::error::Error>>(())
    })
}
