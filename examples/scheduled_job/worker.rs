//! One worker process: at every tick it calls the job, which runs here or is skipped.

use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::Args;
use distlock::{Locker, distributed_lock, redis::RedisLock};

#[derive(Debug, Args)]
pub(crate) struct WorkerArgs {
    #[arg(long)]
    redis_url: String,
    #[arg(long)]
    id: usize,
    #[arg(long)]
    first_tick: u64,
    #[arg(long)]
    ticks: u64,
    #[arg(long)]
    tick_ms: u64,
    #[arg(long)]
    jitter_ms: u64,
    #[arg(long)]
    without_min_hold: bool,
}

/// The job. One process per tick runs the body; the others get `None` at once. The lock is
/// kept 5 s after the grant (`min_hold`), so a worker whose timer fires late still skips.
#[distributed_lock("report:{tick}", skip, ttl = "30s", min_hold = "5s")]
async fn report(tick: u64) -> Option<u64> {
    let lease = distlock::current_lease()?;
    tokio::time::sleep(Duration::from_millis(50)).await; // the report's work
    Some(lease.fencing_token())
}

/// The same job without `min_hold`: released as soon as the body returns.
#[distributed_lock("report:{tick}", skip, ttl = "30s")]
async fn report_without_min_hold(tick: u64) -> Option<u64> {
    let lease = distlock::current_lease()?;
    tokio::time::sleep(Duration::from_millis(50)).await;
    Some(lease.fencing_token())
}

pub(crate) fn main(args: &WorkerArgs) -> Result<ExitCode, crate::Error> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(run(args))?;
    Ok(ExitCode::SUCCESS)
}

async fn run(args: &WorkerArgs) -> Result<(), crate::Error> {
    // Once at start-up: the locker every #[distributed_lock] without `locker = ..` uses.
    distlock::set_default_locker(Locker::new(RedisLock::from_url(&args.redis_url)?));
    for tick in args.first_tick..args.first_tick + args.ticks {
        // This worker's timer: the tick's start plus up to `jitter_ms`.
        let jitter = Duration::from_millis(fastrand::u64(0..=args.jitter_ms));
        let due = Duration::from_millis(tick * args.tick_ms) + jitter;
        let now = SystemTime::now().duration_since(UNIX_EPOCH)?;
        tokio::time::sleep(due.saturating_sub(now)).await;
        let ran = if args.without_min_hold {
            report_without_min_hold(tick).await
        } else {
            report(tick).await
        };
        match ran {
            Some(fence) => println!("ran {tick} {} {fence}", args.id),
            None => println!("skipped {tick} {}", args.id),
        }
    }
    Ok(())
}
