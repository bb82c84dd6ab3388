//! How fast a holder learns that its key is gone, and what watching costs at rest.
//!
//! ```sh
//! cargo run --release -p lock-redis --example loss_latency            # 200 samples a case
//! cargo run --release -p lock-redis --example loss_latency -- 500     # more samples
//! cargo run --release -p lock-redis --example loss_latency -- idle    # 10,000 held keys at rest
//! cargo run --release -p lock-redis --example loss_latency -- register  # a grant's added cost
//! ```
//!
//! Latency: on a throwaway Redis and a throwaway Valkey (lock-testkit, free loopback ports),
//! each sample takes a lock with a 30 s lease, waits until the server tracks its key, then
//! times from just before a foreign `DEL` (or `SET` of another value) is sent on another
//! connection to the moment the guard's `lost()` resolves. Prints p50 / p99 / max per case.
//!
//! Idle: 10,000 locks held with renewed 30 s leases for 30 s (three renewals each), once with
//! loss tracking and once without; prints the server's memory, commands and bytes sent per
//! second, and the client's and the server's CPU over that window.

use std::time::{Duration, Instant};

use lock_core::Locker;
use lock_redis::RedisLock;
use lock_testkit::RedisServer;
use redis::aio::MultiplexedConnection;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<()> {
    let arg = std::env::args().nth(1).unwrap_or_default();
    if arg == "register" {
        return register_cost();
    }
    let servers = [
        ("redis", RedisServer::start()?),
        ("valkey", RedisServer::builder().valkey().start()?),
    ];
    for (label, server) in &servers {
        let mut conn = raw(server).await?;
        // Valkey reports the Redis version it is compatible with under `redis_version`.
        let mut version = info_field(&mut conn, "server", "valkey_version").await?;
        if version.is_empty() {
            version = info_field(&mut conn, "server", "redis_version").await?;
        }
        println!("== {label} {version} ({})", server.url());
        if arg == "idle" {
            for tracking in [false, true] {
                idle(server, tracking).await?;
            }
        } else {
            let samples = arg.parse().unwrap_or(200);
            for tamper in ["DEL", "SET"] {
                latency(server, tamper, samples).await?;
            }
        }
    }
    Ok(())
}

async fn raw(server: &RedisServer) -> Result<MultiplexedConnection> {
    Ok(redis::Client::open(server.url())?
        .get_multiplexed_async_connection()
        .await?)
}

/// One field of `INFO section`, as text.
async fn info_field(
    conn: &mut MultiplexedConnection,
    section: &str,
    field: &str,
) -> Result<String> {
    let info: String = redis::cmd("INFO").arg(section).query_async(conn).await?;
    let prefix = format!("{field}:");
    Ok(info
        .lines()
        .find_map(|line| line.strip_prefix(prefix.as_str()))
        .unwrap_or("")
        .trim()
        .to_owned())
}

async fn info_number(conn: &mut MultiplexedConnection, section: &str, field: &str) -> Result<f64> {
    Ok(info_field(conn, section, field)
        .await?
        .parse()
        .unwrap_or(0.0))
}

fn locker(server: &RedisServer, tracking: bool) -> Result<Locker> {
    let lock = RedisLock::builder()
        .url(server.url())
        .track_losses(tracking)
        .track_losses_after(Duration::ZERO)
        .build()?;
    Ok(Locker::builder(lock).lease(Duration::from_secs(30)).build())
}

/// `samples` times: hold, wait until tracked, tamper, time until `lost()`.
async fn latency(server: &RedisServer, tamper: &str, samples: usize) -> Result<()> {
    let locker = locker(server, true)?;
    let mut conn = raw(server).await?;
    let mut times = Vec::with_capacity(samples);
    for i in 0..samples {
        let name = format!("loss:{tamper}:{i}");
        let tracked = info_number(&mut conn, "stats", "tracking_total_keys").await?;
        let guard = locker.lock(name.as_str()).await?;
        // The key counts once the tracker read it: poll, bounded at 5 s.
        let mut polls = 0;
        while info_number(&mut conn, "stats", "tracking_total_keys").await? <= tracked {
            polls += 1;
            if polls > 500 {
                return Err("the key was never tracked".into());
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let lost = guard.lost();
        let started = Instant::now();
        let mut command = redis::cmd(tamper);
        command.arg(&name);
        if tamper == "SET" {
            command.arg("someone-else");
        }
        command.query_async::<()>(&mut conn).await?;
        tokio::time::timeout(Duration::from_secs(5), lost).await?;
        times.push(started.elapsed());
        drop(guard);
        redis::cmd("DEL")
            .arg(&name)
            .query_async::<()>(&mut conn)
            .await?;
    }
    times.sort();
    // The sample at `permille`/1000 of the sorted times (nearest rank).
    let at = |permille: usize| times[(times.len() - 1) * permille / 1000];
    println!(
        "foreign {tamper} -> lost(): n={samples} p50={:?} p99={:?} max={:?}",
        at(500),
        at(990),
        times[times.len() - 1]
    );
    Ok(())
}

/// This process's CPU time so far (user + system), from `/proc/self/stat`.
fn own_cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which may hold spaces) start after its closing paren.
    let rest = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the paren; 100 Hz.
    Duration::from_millis((ticks(11) + ticks(12)) * 10)
}

/// 10,000 held keys for 30 s (three renewals each), with or without tracking.
async fn idle(server: &RedisServer, tracking: bool) -> Result<()> {
    const HELD: usize = 10_000;
    const WINDOW: Duration = Duration::from_secs(30);
    // Tracked 3 s after their grants: the server's memory is read before and after.
    let lock = RedisLock::builder()
        .url(server.url())
        .track_losses(tracking)
        .track_losses_after(Duration::from_secs(3))
        .build()?;
    let locker = Locker::builder(lock).lease(Duration::from_secs(30)).build();
    let mut conn = raw(server).await?;
    let mut guards = Vec::with_capacity(HELD);
    for i in 0..HELD {
        guards.push(locker.lock(format!("idle:{i}")).await?);
    }
    let memory_held = info_number(&mut conn, "memory", "used_memory").await?;
    tokio::time::sleep(Duration::from_secs(4)).await;
    let tracked = info_number(&mut conn, "stats", "tracking_total_keys").await?;
    let memory_tracked = info_number(&mut conn, "memory", "used_memory").await?;
    let sample = |conn: MultiplexedConnection| async move {
        let mut conn = conn;
        Ok::<_, Box<dyn std::error::Error>>([
            info_number(&mut conn, "stats", "total_commands_processed").await?,
            info_number(&mut conn, "stats", "total_net_output_bytes").await?,
            info_number(&mut conn, "cpu", "used_cpu_user").await?
                + info_number(&mut conn, "cpu", "used_cpu_sys").await?,
        ])
    };
    let (before, cpu_before, started) = (sample(conn.clone()).await?, own_cpu(), Instant::now());
    tokio::time::sleep(WINDOW).await;
    let (after, cpu_after) = (sample(conn.clone()).await?, own_cpu());
    let secs = started.elapsed().as_secs_f64();
    let lost = guards.iter().filter(|g| !g.is_held()).count();
    println!(
        "idle, {HELD} held, tracking {}: tracked keys {tracked}, server memory +{:.0} KiB \
         once tracked, {:.0} commands/s, {:.0} bytes/s sent, server CPU {:.2} %, \
         client CPU {:.2} % (over {secs:.0} s); {lost} lost",
        if tracking { "on " } else { "off" },
        (memory_tracked - memory_held) / 1024.0,
        (after[0] - before[0]) / secs,
        (after[1] - before[1]) / secs,
        (after[2] - before[2]) / secs * 100.0,
        (cpu_after - cpu_before).as_secs_f64() / secs * 100.0,
    );
    for guard in guards {
        guard.release().await?;
    }
    Ok(())
}

/// What watching adds to a grant that ends before the delay: `Lock::watch_loss` and dropping
/// the watch, a million times (no server: nothing is sent before the delay). The closure the
/// `Locker` passes holds a weak reference, one allocation more than this one's.
fn register_cost() -> Result<()> {
    use lock_core::backend::Lock;
    const CALLS: u32 = 1_000_000;
    let lock = RedisLock::builder().url("redis://127.0.0.1:1/").build()?;
    let lease = lock_core::Lease::new(
        "order:42",
        lock_core::Token::generate()?,
        1,
        tokio::time::Instant::now(),
    );
    for on in [false, true] {
        let started = Instant::now();
        for _ in 0..CALLS {
            let on_loss: lock_core::backend::OnLoss = Box::new(|| {});
            let watch = if on {
                lock.watch_loss(&lease, on_loss)
            } else {
                None
            };
            std::hint::black_box(watch);
        }
        println!(
            "watch_loss + drop, tracking {}: {:?} a grant",
            if on { "on " } else { "off" },
            started.elapsed() / CALLS
        );
    }
    Ok(())
}
