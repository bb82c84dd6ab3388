//! Runs N uncontended acquire + release cycles of one client against a Redis URL and exits:
//! the workload `scripts/client-cost.sh` counts instructions of under callgrind.
//!
//! `cargo run --release -p distlock-bench --example s1_cycles -- <redis-url> <client> <cycles>
//! [tasks]` with `client` one of `hand` (the hand-written lock), `handfenced` (the
//! hand-written fenced lock), `rslock` (rslock 0.10's
//! `LockManager` over the one server: `lock` + `Lock::release`), `unfenced` (`Locker` over a
//! `RedisLock` built with `fencing(false)`) and `fenced` (the defaults).
//!
//! `redlock` is distlock's fenced Redlock (`Locker` over a `Redlock` of `RedisLock`s): give the
//! node URLs comma-separated, as for `rslock` over several nodes (S4's clients).
//!
//! With `tasks` (S2's shape with 32, for a profiler: `perf record`, or callgrind), that many
//! tasks share the cycles on a two-worker multi-thread runtime, as the load tool runs them,
//! each on its own name, so what grows with concurrency shows against one task.

use std::time::Duration;

use distlock_bench::{HandFencedLock, HandLock};
use lock_core::Locker;
use lock_redis::RedisLock;

const USAGE: &str = "usage: s1_cycles <redis-url> <hand|handfenced|rslock|unfenced|fenced|redlock> <cycles> [tasks]";

fn main() -> Result<(), Failure> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // Without a task count: one task on a current-thread runtime (what client-cost.sh counts).
    // With one: that many tasks on a two-worker multi-thread runtime, as the load tool runs.
    let (url, client, cycles, tasks) = match args.as_slice() {
        [url, client, cycles] => (url, client, cycles, None),
        [url, client, cycles, tasks] => (url, client, cycles, Some(tasks.as_str())),
        _ => return Err(USAGE.into()),
    };
    let cycles: u32 = cycles.parse().map_err(|_| USAGE)?;
    let runtime = match tasks {
        None => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?,
        Some(_) => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?,
    };
    let tasks: u32 = tasks.unwrap_or("1").parse().map_err(|_| USAGE)?;
    if tasks == 0 {
        return Err(USAGE.into());
    }
    let client = Client::connect(url, client, &runtime)?;
    runtime.block_on(async move {
        let mut running = tokio::task::JoinSet::new();
        for task in 0..tasks {
            let (client, name) = (client.clone(), format!("s1:{task}"));
            let share = cycles / tasks + u32::from(task < cycles % tasks);
            running.spawn(async move { client.cycles(&name, share).await });
        }
        while let Some(done) = running.join_next().await {
            done??;
        }
        Ok(())
    })
}

/// Whether `DISTLOCK_FIXED_TTL` is set: requests then ask for a fixed TTL (no renewal), to
/// count what renewal costs a cycle. Read once, not per cycle (`getenv` is not free).
fn fixed_ttl() -> bool {
    std::env::var_os("DISTLOCK_FIXED_TTL").is_some()
}

type Failure = Box<dyn std::error::Error + Send + Sync>;

/// One of the clients compared, connected.
#[derive(Clone)]
enum Client {
    Hand(HandLock),
    HandFenced(HandFencedLock),
    Rslock(std::sync::Arc<rslock::LockManager>),
    /// With `true`, each request asks for a fixed TTL (`DISTLOCK_FIXED_TTL=1`: what renewal
    /// costs a cycle).
    Locker(Locker, bool),
}

impl Client {
    fn connect(
        url: &str,
        client: &str,
        runtime: &tokio::runtime::Runtime,
    ) -> Result<Self, Failure> {
        Ok(match client {
            "hand" => Self::Hand(runtime.block_on(HandLock::connect(url))?),
            "handfenced" => Self::HandFenced(runtime.block_on(HandFencedLock::connect(url))?),
            "rslock" => Self::Rslock(std::sync::Arc::new(rslock::LockManager::new(
                url.split(',').collect::<Vec<_>>(),
            ))),
            "redlock" => {
                let nodes = url
                    .split(',')
                    .map(|url| RedisLock::builder().url(url).build())
                    .collect::<Result<Vec<_>, _>>()?;
                let redlock = lock_redlock::Redlock::builder().nodes(nodes).build()?;
                Self::Locker(Locker::new(redlock), fixed_ttl())
            }
            "unfenced" | "fenced" => {
                let mut builder = RedisLock::builder().url(url).fencing(client == "fenced");
                // What loss tracking costs a cycle: `DISTLOCK_TRACK_LOSSES=off`.
                if std::env::var("DISTLOCK_TRACK_LOSSES").is_ok_and(|v| v == "off") {
                    builder = builder.track_losses(false);
                }
                let lock = builder.build()?;
                Self::Locker(Locker::new(lock), fixed_ttl())
            }
            _ => return Err(USAGE.into()),
        })
    }

    /// `cycles` acquire + release cycles of the free lock `name`.
    async fn cycles(&self, name: &str, cycles: u32) -> Result<(), Failure> {
        for _ in 0..cycles {
            match self {
                Self::Hand(hand) => {
                    let token = hand
                        .try_acquire(name, Duration::from_secs(30))
                        .await?
                        .ok_or("the lock was busy")?;
                    hand.release(name, &token).await?;
                }
                Self::HandFenced(hand) => {
                    let (token, _fence) = hand
                        .try_acquire(name, Duration::from_secs(30))
                        .await?
                        .ok_or("the lock was busy")?;
                    hand.release(name, &token).await?;
                }
                Self::Rslock(manager) => {
                    let lock = manager.lock(name, Duration::from_secs(30)).await?;
                    lock.release().await;
                }
                Self::Locker(locker, fixed) => {
                    let mut request = locker.lock(name);
                    if *fixed {
                        request = request.fixed_ttl(Duration::from_secs(30));
                    }
                    let guard = request.try_acquire().await?.ok_or("the lock was busy")?;
                    guard.release().await?;
                }
            }
        }
        Ok(())
    }
}
