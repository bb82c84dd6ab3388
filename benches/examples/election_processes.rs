//! Leader election's figures: failover time after a `kill -9` of the leader, and the cost of
//! idle leaderships, on Redis and on PostgreSQL's lease table, on servers it starts itself
//! (lock-testkit, free loopback ports, stopped by PID).
//!
//! ```text
//! cargo run --release -p distlock-bench --example election_processes -- failover <redis|postgres> [KILLS=20] [LEASE_MS=2000]
//! cargo run --release -p distlock-bench --example election_processes -- idle <redis|postgres> [ELECTIONS=1000] [LEASE_MS=3000] [PERIODS=3]
//! ```
//!
//! - **failover**: three candidate processes (this program re-run, `__candidate`) campaign in
//!   one election with `Election::run`. Each term's start is logged to a separate witness Redis
//!   with the machine's `CLOCK_MONOTONIC`. KILLS times: wait a random part of a lease (so the
//!   kill falls anywhere in the renewal cycle), `kill -9` the leader, and measure from the kill
//!   to the next term's start; a fresh candidate replaces the killed one. Prints p50, p99, min
//!   and max. The failover is bounded by the lease left at the kill (between two thirds of it
//!   and all of it: renewals come every third) plus a candidate's wake-up.
//! - **idle**: this process campaigns in ELECTIONS elections and holds them for PERIODS
//!   lease periods; prints the process's CPU time (user + system, from `/proc/self/stat`) and
//!   the server's work in that time (Redis: `total_commands_processed`; PostgreSQL: the
//!   database's committed transactions), per leadership and lease period.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use lock_core::{Locker, TermEvent};
use lock_postgres::PostgresLock;
use lock_redis::RedisLock;
use lock_testkit::{PostgresServer, RedisServer};
use nix::time::{ClockId, clock_gettime};
use redis::aio::MultiplexedConnection;

const USAGE: &str = "usage: election_processes failover <redis|postgres> [KILLS] [LEASE_MS] | \
                     election_processes idle <redis|postgres> [ELECTIONS] [LEASE_MS] [PERIODS]";
const ELECTION: &str = "bench:failover";
const EVENTS: &str = "failover:starts";
const CANDIDATES: usize = 3;

type Error = Box<dyn std::error::Error>;

fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let number = |i: usize, default: u64| -> Result<u64, Error> {
        args.get(i)
            .map_or(Ok(default), |a| a.parse().map_err(|_| USAGE.into()))
    };
    match (args.first().map(String::as_str), args.get(1)) {
        (Some("__candidate"), Some(backend)) => {
            let url = args.get(2).ok_or(USAGE)?;
            let witness = args.get(3).ok_or(USAGE)?;
            let lease = Duration::from_millis(number(4, 2000)?);
            runtime.block_on(candidate(backend, url, witness, lease))
        }
        (Some("failover"), Some(backend)) => {
            let kills = number(2, 20)?;
            let lease = Duration::from_millis(number(3, 2000)?);
            runtime.block_on(failover(backend, kills, lease))
        }
        (Some("idle"), Some(backend)) => {
            let elections = number(2, 1000)?;
            let lease = Duration::from_millis(number(3, 3000)?);
            let periods = number(4, 3)?;
            runtime.block_on(idle(backend, elections, lease, periods))
        }
        _ => Err(USAGE.into()),
    }
}

/// A server of the backend, kept alive while measured.
enum Server {
    Redis(RedisServer),
    Postgres(PostgresServer),
}

impl Server {
    /// Starts a throwaway server of `backend` (PostgreSQL: with the lease table).
    async fn start(backend: &str) -> Result<Self, Error> {
        match backend {
            "redis" => Ok(Self::Redis(RedisServer::start()?)),
            "postgres" => {
                let server = PostgresServer::start()?;
                let lock = PostgresLock::builder().url(server.url()).build()?;
                lock.migrate().await?;
                Ok(Self::Postgres(server))
            }
            _ => Err(USAGE.into()),
        }
    }

    fn url(&self) -> String {
        match self {
            Self::Redis(s) => s.url(),
            Self::Postgres(s) => s.url(),
        }
    }

    /// Redis's commands so far by name (`INFO commandstats`); empty for PostgreSQL.
    fn commands(&self) -> Result<Vec<(String, i64)>, Error> {
        let Self::Redis(s) = self else {
            return Ok(Vec::new());
        };
        let info = s.command(&["INFO", "commandstats"])?;
        Ok(info
            .lines()
            .filter_map(|l| {
                let (name, rest) = l.strip_prefix("cmdstat_")?.split_once(":calls=")?;
                Some((name.to_owned(), rest.split(',').next()?.parse().ok()?))
            })
            .collect())
    }

    /// The server's work so far: Redis commands processed, or PostgreSQL transactions
    /// committed in the database.
    async fn work(&self) -> Result<i64, Error> {
        match self {
            Self::Redis(s) => {
                let info = s.command(&["INFO", "stats"])?;
                let line = info
                    .lines()
                    .find_map(|l| l.strip_prefix("total_commands_processed:"))
                    .ok_or("no total_commands_processed")?;
                Ok(line.trim().parse()?)
            }
            Self::Postgres(s) => {
                let (client, connection) =
                    tokio_postgres::connect(&s.url(), tokio_postgres::NoTls).await?;
                tokio::spawn(connection);
                let row = client
                    .query_one(
                        "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()",
                        &[],
                    )
                    .await?;
                Ok(row.get(0))
            }
        }
    }
}

/// A locker on `backend` at `url`.
fn locker(backend: &str, url: &str) -> Result<Locker, Error> {
    Ok(match backend {
        "redis" => Locker::new(RedisLock::builder().url(url).build()?),
        "postgres" => Locker::new(PostgresLock::builder().url(url).build()?),
        _ => return Err(USAGE.into()),
    })
}

/// `CLOCK_MONOTONIC` in µs: one clock for every process of the machine.
fn now_us() -> Result<i64, Error> {
    let t = clock_gettime(ClockId::CLOCK_MONOTONIC)?;
    Ok(t.tv_sec() * 1_000_000 + t.tv_nsec() / 1000)
}

async fn witness(url: &str) -> Result<MultiplexedConnection, Error> {
    Ok(redis::Client::open(url)?
        .get_multiplexed_async_connection()
        .await?)
}

/// A candidate process: campaigns for ever, logging each term's start (`pid term µs`).
async fn candidate(
    backend: &str,
    url: &str,
    witness_url: &str,
    lease: Duration,
) -> Result<(), Error> {
    let mut conn = witness(witness_url).await?;
    let locker = locker(backend, url)?;
    let election = locker.elect(ELECTION).lease(lease);
    let mut run = election.run(|_lease| futures::future::pending::<()>());
    // Bounded by the process's life: the parent kills it.
    while let Some(event) = run.next_event().await {
        if let TermEvent::Started { term } = event {
            let at = now_us()?;
            let line = format!("{} {term} {at}", std::process::id());
            let () = redis::cmd("RPUSH")
                .arg(EVENTS)
                .arg(line)
                .query_async(&mut conn)
                .await?;
        }
    }
    Ok(())
}

/// One logged start: pid, term, monotonic µs.
async fn starts(conn: &mut MultiplexedConnection) -> Result<Vec<(u32, u64, i64)>, Error> {
    let lines: Vec<String> = redis::cmd("LRANGE")
        .arg(EVENTS)
        .arg(0)
        .arg(-1)
        .query_async(conn)
        .await?;
    Ok(lines
        .iter()
        .filter_map(|l| {
            let mut w = l.split(' ');
            Some((
                w.next()?.parse().ok()?,
                w.next()?.parse().ok()?,
                w.next()?.parse().ok()?,
            ))
        })
        .collect())
}

/// Waits (at most 30 s) for a start with a term above `above`.
async fn next_start(
    conn: &mut MultiplexedConnection,
    above: u64,
) -> Result<(u32, u64, i64), Error> {
    for _ in 0..3000 {
        if let Some(s) = starts(conn).await?.into_iter().find(|s| s.1 > above) {
            return Ok(s);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Err("no new leader within 30 s".into())
}

fn spawn_candidate(
    backend: &str,
    url: &str,
    witness: &str,
    lease: Duration,
) -> Result<Child, Error> {
    Ok(Command::new(std::env::current_exe()?)
        .args(["__candidate", backend, url, witness])
        .arg(lease.as_millis().to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()?)
}

async fn failover(backend: &str, kills: u64, lease: Duration) -> Result<(), Error> {
    let server = Server::start(backend).await?;
    let witness_server = RedisServer::start()?;
    let mut conn = witness(&witness_server.url()).await?;
    let mut candidates = Vec::new();
    for _ in 0..CANDIDATES {
        candidates.push(spawn_candidate(
            backend,
            &server.url(),
            &witness_server.url(),
            lease,
        )?);
    }
    let mut leader = next_start(&mut conn, 0).await?;
    let mut times = Vec::new();
    for _ in 0..kills {
        // Anywhere in the leader's renewal cycle.
        let wait = lease.mul_f64(fastrand::f64());
        tokio::time::sleep(wait).await;
        let at = candidates
            .iter()
            .position(|c| c.id() == leader.0)
            .ok_or("the leader is not a candidate")?;
        let mut killed = candidates.swap_remove(at);
        if let Err(error) = killed.kill() {
            // It had exited already: reaped at once.
            let _ = killed.wait();
            return Err(error.into());
        }
        let killed_at = now_us();
        killed.wait()?;
        let killed_at = killed_at?;
        let next = next_start(&mut conn, leader.1).await?;
        times.push(Duration::from_micros(u64::try_from(next.2 - killed_at)?));
        candidates.push(spawn_candidate(
            backend,
            &server.url(),
            &witness_server.url(),
            lease,
        )?);
        leader = next;
    }
    for mut c in candidates {
        let _ = c.kill();
        let _ = c.wait();
    }
    times.sort();
    // The nearest rank: `pct` percent of the way through the sorted times.
    let pick = |pct: usize| times[((times.len() - 1) * pct + 50) / 100];
    println!(
        "failover on {backend}, lease {lease:?}, {} kills: p50 {:?}, p99 {:?}, min {:?}, max {:?}",
        times.len(),
        pick(50),
        pick(99),
        times[0],
        times[times.len() - 1]
    );
    Ok(())
}

/// This process's CPU time so far (user + system), from `/proc/self/stat` (clock ticks of
/// 10 ms, the Linux default `USER_HZ`).
fn cpu() -> Result<Duration, Error> {
    let stat = std::fs::read_to_string("/proc/self/stat")?;
    let (_, rest) = stat.rsplit_once(") ").ok_or("stat")?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = fields[11].parse::<u64>()? + fields[12].parse::<u64>()?;
    Ok(Duration::from_millis(ticks * 10))
}

async fn idle(backend: &str, elections: u64, lease: Duration, periods: u64) -> Result<(), Error> {
    let server = Server::start(backend).await?;
    let locker = locker(backend, &server.url())?;
    let mut held = Vec::new();
    for i in 0..elections {
        held.push(
            locker
                .elect(format!("idle:{i}"))
                .lease(lease)
                .campaign()
                .await?,
        );
    }
    let (cpu_before, work_before) = (cpu()?, server.work().await?);
    let commands_before = server.commands()?;
    let span = lease * u32::try_from(periods)?;
    tokio::time::sleep(span).await;
    let (cpu_after, work_after) = (cpu()?, server.work().await?);
    let commands: Vec<String> = server
        .commands()?
        .into_iter()
        .filter_map(|(name, calls)| {
            let before = commands_before
                .iter()
                .find(|c| c.0 == name)
                .map_or(0, |c| c.1);
            (calls > before).then(|| format!("{name} {}", calls - before))
        })
        .collect();
    let leading = held.iter().filter(|l| l.is_leader()).count();
    let cpu = cpu_after - cpu_before;
    // The probe itself: one INFO (Redis) or one transaction (PostgreSQL) at the end.
    let work = work_after - work_before - 1;
    let per = work as f64 / (elections * periods) as f64;
    println!(
        "idle on {backend}: {elections} leaderships, lease {lease:?}, held {span:?} ({periods} lease periods), \
         {leading} still leading; CPU {cpu:?} ({:.2} % of a core); server {} {work} = {per:.2} per leadership per lease period",
        cpu.as_secs_f64() * 100.0 / span.as_secs_f64(),
        if backend == "redis" {
            "commands"
        } else {
            "transactions"
        },
    );
    if !commands.is_empty() {
        println!(
            "  Redis commands meanwhile (the probes' INFO included): {}",
            commands.join(", ")
        );
    }
    for l in held {
        let _ = l.resign().await;
    }
    Ok(())
}
