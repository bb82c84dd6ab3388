//! # Cache rebuild: one replica rebuilds an expired entry, a stalled rebuild is refused
//!
//! Three replica **processes** serve one cache entry from Redis. When it expires, each tries
//! the rebuild lock once (`try_acquire`): exactly one gets it and rebuilds the value, while the
//! others keep serving their stale copy instead of stampeding the database. The rebuilt value
//! is written with `distlock_fenced_set` (`RedisFences::set`, the lock's fencing token), so a
//! rebuild that stalled past its lease cannot overwrite a newer one.
//!
//! The example stalls the first rebuild: it stops that replica (SIGSTOP) mid-rebuild, waits
//! until another replica, granted the lock once the lease ran out, has written a newer value,
//! and wakes it (SIGCONT). The woken replica writes its old value with its old token: the fence
//! refuses it (`STALEFENCE`, `LockError::Fenced`). The table lists every write; the example
//! exits 1 unless exactly that write was refused and every other one applied.
//!
//! Starts a throwaway `redis-server` (through `lock-testkit`) unless `--redis-url` names one.
//! About 6 s.
//!
//! ```text
//! cargo run --example cache_rebuild
//! ```
//!
//! Files: `main.rs` (options, the parent: the pause and the table), `replica.rs` (one
//! replica process).

mod replica;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use clap::{Args, Parser, Subcommand};
use comfy_table::Table;
use lock_testkit::RedisServer;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use replica::ReplicaArgs;

/// The error type of the example's own plumbing.
type Error = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Replicas in the run.
const REPLICAS: usize = 3;

/// Three replicas share a cache entry; one rebuild stalls past its lease.
#[derive(Debug, Parser)]
struct Cli {
    #[command(flatten)]
    run: RunArgs,
    #[command(subcommand)]
    command: Option<Cmd>,
}

#[derive(Debug, Clone, Args)]
struct RunArgs {
    /// The rebuild lock's lease, in milliseconds.
    #[arg(long, default_value_t = 1500)]
    lease_ms: u64,
    /// How long a rebuild computes, in milliseconds (below the lease).
    #[arg(long, default_value_t = 500)]
    rebuild_ms: u64,
    /// How long a rebuilt value lives in the cache, in milliseconds.
    #[arg(long, default_value_t = 1000)]
    cache_ttl_ms: u64,
    /// Redis for the lock and the cache; without it a throwaway redis-server is started.
    #[arg(long, value_name = "URL", visible_alias = "url", env = "REDIS_URL")]
    redis_url: Option<String>,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// One replica process (started by the parent).
    #[command(hide = true)]
    Replica(ReplicaArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Some(Cmd::Replica(args)) => replica::main(&args).map(|()| ExitCode::SUCCESS),
        None => parent(&cli.run, |args| {
            let mut command = Command::new(std::env::current_exe()?);
            command.args(args.to_args());
            Ok(command)
        })
        .map(|run| {
            println!("{}", run.table());
            println!("{}", run.verdict());
            if run.passed() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }),
    };
    result.unwrap_or_else(|error| {
        eprintln!("error: {error}");
        ExitCode::from(2)
    })
}

/// One line a replica printed: what, which replica, and for a rebuild or write its token and
/// outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Line {
    what: String,
    id: usize,
    token: u64,
    outcome: String,
}

fn parse(line: &str) -> Option<Line> {
    let mut words = line.split_whitespace();
    let what = words.next()?.to_owned();
    if !["stale", "rebuilding", "wrote"].contains(&what.as_str()) {
        return None;
    }
    Some(Line {
        what,
        id: words.next()?.parse().ok()?,
        token: words.next().map_or(Some(0), |t| t.parse().ok())?,
        outcome: words.next().unwrap_or("").to_owned(),
    })
}

/// What the run saw.
#[derive(Debug, Clone, Default)]
struct Run {
    /// The replica stopped mid-rebuild, and its rebuild's token.
    paused: Option<(usize, u64)>,
    /// Every fenced write, in the order the parent read them.
    writes: Vec<Line>,
    /// Stale copies served, per replica.
    stale: [usize; REPLICAS],
}

impl Run {
    /// Exactly the paused rebuild's write was refused, and every other write applied.
    fn passed(&self) -> bool {
        let Some((id, token)) = self.paused else {
            return false;
        };
        let refused: Vec<&Line> = self.writes.iter().filter(|w| w.outcome != "ok").collect();
        refused.len() == 1
            && refused[0].id == id
            && refused[0].token == token
            && refused[0].outcome == "refused"
    }

    /// Every write: who, with which token, whether the fence had accepted a larger one before,
    /// and the answer.
    fn table(&self) -> Table {
        let mut table = Table::new();
        table.set_header(["#", "replica", "fencing token", "stale?", "write"]);
        let mut best = 0;
        for (n, w) in self.writes.iter().enumerate() {
            let stale = w.token < best;
            if w.outcome == "ok" {
                best = best.max(w.token);
            }
            let paused = self
                .paused
                .is_some_and(|(id, t)| id == w.id && t == w.token);
            table.add_row([
                (n + 1).to_string(),
                format!("{}{}", w.id, if paused { " (paused)" } else { "" }),
                w.token.to_string(),
                if stale { "stale" } else { "" }.to_owned(),
                w.outcome.clone(),
            ]);
        }
        table
    }

    fn verdict(&self) -> String {
        let refused = self.writes.iter().filter(|w| w.outcome != "ok").count();
        format!(
            "{} writes, {refused} refused; stale copies served while another replica rebuilt: {:?}; {}",
            self.writes.len(),
            self.stale,
            if self.passed() {
                "the stalled rebuild's write, and only it, was refused"
            } else {
                "UNEXPECTED: not exactly the stalled rebuild's write was refused"
            }
        )
    }
}

/// Starts the server (unless given one) and the replicas (`launch` makes each one's command),
/// plays the pause, and stops them.
fn parent(
    args: &RunArgs,
    launch: impl Fn(&ReplicaArgs) -> Result<Command, Error>,
) -> Result<Run, Error> {
    // The throwaway server comes from the workspace's unpublished test kit; in your own project
    // keep only the first arm.
    let (_server, url) = match &args.redis_url {
        Some(url) => (None, url.clone()),
        None => {
            let server = RedisServer::start()?;
            let url = server.url();
            (Some(server), url)
        }
    };
    let lease = Duration::from_millis(args.lease_ms);
    let mut redis = redis::Client::open(url.as_str())?.get_connection()?;
    // A fresh fence record (another run's tokens may be from another server) and a first value
    // about to expire, which every replica reads and keeps as its stale copy.
    let () = redis::cmd("DEL")
        .arg(distlock::redis::RedisFences::record_key(
            replica::CACHE_KEY,
        )?)
        .query(&mut redis)?;
    let () = redis::cmd("SET")
        .arg(replica::CACHE_KEY)
        .arg("report v0")
        .arg("PX")
        .arg(300)
        .query(&mut redis)?;
    let run_ms = u64::try_from((lease * 4 + Duration::from_secs(20)).as_millis())?;
    let (send, lines) = mpsc::channel::<Line>();
    let mut children = Vec::new();
    for id in 0..REPLICAS {
        let replica = ReplicaArgs {
            redis_url: url.clone(),
            id,
            lease_ms: args.lease_ms,
            rebuild_ms: args.rebuild_ms,
            cache_ttl_ms: args.cache_ttl_ms,
            run_ms,
        };
        children.push(spawn(launch(&replica)?, send.clone())?);
    }
    let result = story(&children, &lines, lease);
    for child in &mut children {
        // SIGCONT first: a stopped child cannot die of SIGKILL until it runs.
        let _ = signal(child, Signal::SIGCONT);
        let _ = child.kill();
        let _ = child.wait();
    }
    result
}

/// Spawns `command` with its stdout read line by line into `send`.
fn spawn(mut command: Command, send: mpsc::Sender<Line>) -> Result<Child, Error> {
    let mut child = command.stdout(Stdio::piped()).spawn()?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(line) = parse(&line)
                && send.send(line).is_err()
            {
                break;
            }
        }
    });
    Ok(child)
}

fn signal(child: &Child, signal: Signal) -> Result<(), Error> {
    kill(Pid::from_raw(i32::try_from(child.id())?), signal)?;
    Ok(())
}

/// The pause: stop the first rebuild's replica, wait for a newer write, wake it, wait for its
/// write, then a little more of the normal run.
fn story(children: &[Child], lines: &mpsc::Receiver<Line>, lease: Duration) -> Result<Run, Error> {
    let mut run = Run::default();
    let long = lease * 3 + Duration::from_secs(10);
    let first = wait_for(lines, &mut run, long, |l| l.what == "rebuilding")
        .ok_or("no replica rebuilt the entry")?;
    signal(&children[first.id], Signal::SIGSTOP)?;
    run.paused = Some((first.id, first.token));
    println!(
        "replica {} rebuilds with token {}: stopped (SIGSTOP) mid-rebuild",
        first.id, first.token
    );
    let newer = wait_for(lines, &mut run, long, |l| {
        l.what == "wrote" && l.outcome == "ok" && l.token > first.token
    })
    .ok_or("no other replica rebuilt the entry after the lease ran out")?;
    println!(
        "replica {} rebuilt it with token {} once the lease ran out; waking replica {} (SIGCONT)",
        newer.id, newer.token, first.id
    );
    signal(&children[first.id], Signal::SIGCONT)?;
    wait_for(lines, &mut run, long, |l| {
        l.what == "wrote" && l.id == first.id && l.token == first.token
    })
    .ok_or("the woken replica never wrote")?;
    // One more expiry and rebuild, undisturbed.
    let last = run.writes.iter().map(|w| w.token).max().unwrap_or(0);
    wait_for(lines, &mut run, long, |l| {
        l.what == "wrote" && l.token > last
    });
    Ok(run)
}

/// Reads lines into `run` until one matches `want` (returned) or `limit` passes.
fn wait_for(
    lines: &mpsc::Receiver<Line>,
    run: &mut Run,
    limit: Duration,
    want: impl Fn(&Line) -> bool,
) -> Option<Line> {
    let deadline = Instant::now() + limit;
    while let Ok(line) = lines.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
        match line.what.as_str() {
            "wrote" => run.writes.push(line.clone()),
            "stale" => {
                if let Some(n) = run.stale.get_mut(line.id) {
                    *n += 1;
                }
            }
            _ => {}
        }
        if want(&line) {
            return Some(line);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Where a child test process finds its replica's arguments.
    const ARGS_VAR: &str = "CACHE_REBUILD_REPLICA_ARGS";

    /// The example's run with its replicas as child processes of this test binary: the table
    /// shows exactly one write refused, the stalled rebuild's.
    #[test]
    fn the_stalled_rebuild_and_only_it_is_refused() {
        let args = RunArgs {
            lease_ms: 1500,
            rebuild_ms: 500,
            cache_ttl_ms: 1000,
            redis_url: None,
        };
        let run = parent(&args, |replica| {
            let mut command = Command::new(std::env::current_exe()?);
            command
                .args([
                    "tests::replica_process",
                    "--exact",
                    "--ignored",
                    "--nocapture",
                ])
                .env(ARGS_VAR, replica.to_args().join("\u{1f}"));
            Ok(command)
        })
        .expect("the run");
        let table = run.table().to_string();
        println!("{table}\n{}", run.verdict());
        let (id, token) = run.paused.expect("a replica was paused");
        let refused: Vec<&str> = table.lines().filter(|l| l.contains("refused")).collect();
        assert_eq!(refused.len(), 1, "{table}");
        assert!(refused[0].contains(&format!("{id} (paused)")), "{table}");
        assert!(refused[0].contains(&token.to_string()), "{table}");
        assert!(refused[0].contains("stale"), "{table}");
        assert!(run.passed(), "{table}");
        assert!(run.writes.len() >= 3, "{table}");
    }

    /// A replica, when started by the test above (else nothing).
    #[test]
    #[ignore = "a child process of the_stalled_rebuild_and_only_it_is_refused"]
    fn replica_process() {
        let Ok(args) = std::env::var(ARGS_VAR) else {
            return;
        };
        let words = std::iter::once("cache_rebuild").chain(args.split('\u{1f}'));
        let Some(Cmd::Replica(replica)) = Cli::parse_from(words).command else {
            panic!("not a replica's arguments: {args}");
        };
        replica::main(&replica).expect("the replica");
    }

    #[test]
    fn lines_parse() {
        let line = parse("wrote 2 17 refused").expect("a write");
        assert_eq!(
            (line.id, line.token, line.outcome.as_str()),
            (2, 17, "refused")
        );
        assert_eq!(parse("stale 1 0 9").map(|l| l.id), Some(1));
        assert_eq!(parse("running 1 test"), None);
    }
}
