//! # A scheduled job run by several processes, exactly once per tick
//!
//! Several worker **processes** share a schedule: at every tick (each `--tick-ms`, on the wall
//! clock) each of them calls the job
//!
//! ```text
//! #[distributed_lock("report:{tick}", skip, ttl = "30s", min_hold = "5s")]
//! async fn report(tick: u64) -> Option<u64>
//! ```
//!
//! and exactly one of them runs it: the others find the tick's lock taken and skip the body
//! (ShedLock's semantics), getting `None`. Their timers fire up to `--jitter-ms` apart, as
//! real machines' do; `min_hold` (ShedLock's lockAtLeastFor) keeps the lock after the winner
//! finishes, so a worker whose timer fires late does not run the tick a second time. Run with
//! `--without-min-hold` to see what happens without it: late workers run ticks again.
//!
//! Each worker installs the process-wide default locker (`distlock::set_default_locker`) at
//! start-up; the attribute names no `locker`. The parent starts a throwaway `redis-server`
//! (through `lock-testkit`) unless `--redis-url` names one, prints who ran each tick, and exits
//! with status 1 if a tick ran other than once.
//!
//! ```text
//! cargo run --example scheduled_job
//! cargo run --example scheduled_job -- --workers 5 --ticks 10 --tick-ms 500
//! cargo run --example scheduled_job -- --without-min-hold    # shows double runs
//! ```
//!
//! Files: `main.rs` (options and the parent), `worker.rs` (one worker process).

mod worker;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, ExitCode, Stdio};
use std::sync::mpsc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::{Args, Parser, Subcommand};
use lock_testkit::RedisServer;

/// The error type of the example's own plumbing.
type Error = Box<dyn std::error::Error + Send + Sync + 'static>;

/// A scheduled job run by several processes, exactly once per tick.
#[derive(Debug, Parser)]
struct Cli {
    #[command(flatten)]
    run: RunArgs,
    #[command(subcommand)]
    command: Option<Cmd>,
}

#[derive(Debug, Args)]
struct RunArgs {
    /// Worker processes sharing the schedule.
    #[arg(long, default_value_t = 4)]
    workers: usize,
    /// Ticks to run.
    #[arg(long, default_value_t = 8)]
    ticks: u64,
    /// The schedule's period, in milliseconds.
    #[arg(long, default_value_t = 1000)]
    tick_ms: u64,
    /// How far apart the workers' timers fire, at most, in milliseconds.
    #[arg(long, default_value_t = 300)]
    jitter_ms: u64,
    /// Use the job without `min_hold`: late workers then run ticks again.
    #[arg(long)]
    without_min_hold: bool,
    /// Redis to lock on; without it a throwaway redis-server is started.
    #[arg(long, value_name = "URL", visible_alias = "url", env = "REDIS_URL")]
    redis_url: Option<String>,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// One worker process (started by the parent).
    #[command(hide = true)]
    Worker(worker::WorkerArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Some(Cmd::Worker(args)) => worker::main(&args),
        None => parent(&cli.run),
    };
    match result {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::from(2)
        }
    }
}

fn parent(args: &RunArgs) -> Result<ExitCode, Error> {
    // The throwaway server comes from the workspace's unpublished test kit; in your own project
    // keep only the first arm (a `--redis-url` or `REDIS_URL` of your Redis).
    let (_server, url) = match &args.redis_url {
        Some(url) => (None, url.clone()),
        None => {
            let server = RedisServer::start()?;
            let url = server.url();
            (Some(server), url)
        }
    };
    // Two ticks from now: time for every worker to start.
    let now_ms = u64::try_from(SystemTime::now().duration_since(UNIX_EPOCH)?.as_millis())?;
    let first_tick = now_ms / args.tick_ms + 2;
    println!(
        "{} workers, {} ticks of {} ms, timers up to {} ms apart, {}",
        args.workers,
        args.ticks,
        args.tick_ms,
        args.jitter_ms,
        if args.without_min_hold {
            "WITHOUT min_hold"
        } else {
            "min_hold = 5s"
        }
    );

    let (lines, received) = mpsc::channel::<String>();
    let mut children = Vec::new();
    for id in 0..args.workers {
        let mut child = Command::new(std::env::current_exe()?)
            .args(["worker", "--redis-url", &url, "--id", &id.to_string()])
            .args([
                "--first-tick",
                &first_tick.to_string(),
                "--ticks",
                &args.ticks.to_string(),
            ])
            .args([
                "--tick-ms",
                &args.tick_ms.to_string(),
                "--jitter-ms",
                &args.jitter_ms.to_string(),
            ])
            .args(args.without_min_hold.then_some("--without-min-hold"))
            .stdout(Stdio::piped())
            .spawn()?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let lines = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if lines.send(line).is_err() {
                    break;
                }
            }
        });
        children.push(child);
    }
    drop(lines);

    // tick -> workers that ran it
    let mut ran: BTreeMap<u64, Vec<usize>> = (first_tick..first_tick + args.ticks)
        .map(|t| (t, Vec::new()))
        .collect();
    let mut skipped = 0_u64;
    let deadline = Duration::from_millis(args.tick_ms * (args.ticks + 4) + 30_000);
    let started = std::time::Instant::now();
    while let Some(left) = deadline.checked_sub(started.elapsed()) {
        let Ok(line) = received.recv_timeout(left) else {
            break;
        };
        let fields: Vec<&str> = line.split_whitespace().collect();
        match fields.as_slice() {
            ["ran", tick, worker, fence] => {
                let (tick, worker): (u64, usize) = (tick.parse()?, worker.parse()?);
                let n = tick.saturating_sub(first_tick) + 1;
                println!("tick {n} ({tick}): worker {worker} ran the job, fencing token {fence}");
                ran.entry(tick).or_default().push(worker);
            }
            ["skipped", ..] => skipped += 1,
            _ => eprintln!("worker: {line}"),
        }
    }
    let mut failed_workers = 0;
    for mut child in children {
        if !child.wait()?.success() {
            failed_workers += 1;
        }
    }

    println!();
    println!(
        "{:>4}  {:>12}  {:>4}  by workers",
        "tick", "report:{tick}", "runs"
    );
    let mut wrong = 0;
    for (tick, workers) in &ran {
        let mark = if workers.len() == 1 {
            ""
        } else {
            "   <-- not exactly once"
        };
        wrong += usize::from(workers.len() != 1);
        let n = tick - first_tick + 1;
        println!(
            "{n:>4}  {tick:>12}  {:>4}  {workers:?}{mark}",
            workers.len()
        );
    }
    println!(
        "\n{} ticks, {wrong} not run exactly once; {skipped} skipped calls",
        ran.len()
    );
    Ok(if wrong == 0 && failed_workers == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
