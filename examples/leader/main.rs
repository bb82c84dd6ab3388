//! # Leader election: three replicas, one leader, a fenced resource
//!
//! Three replica **processes** campaign in the election `leader-example`
//! (`locker.elect(..).run(..)`). The leader's work writes to a resource every 100 ms with its
//! **term**, and the resource rejects a write whose term is smaller than one it has accepted.
//! Then the example makes the leader fail, twice:
//!
//! 1. **paused** (SIGSTOP, as a long GC pause or a frozen VM would) for longer than its lease:
//!    another replica is elected once the lease runs out; when the paused one wakes up, its
//!    `lost()` has fired and its work is cancelled, and a write it still got out is rejected
//!    by the resource (its term is older);
//! 2. **killed** (SIGKILL): another replica is elected once the lease runs out.
//!
//! It prints each replica's terms and rejected writes as they come, then checks that the terms
//! only grew and that the paused leader's term ended as lost; exits 1 if not.
//! Starts a throwaway `redis-server` (through `lock-testkit`) unless `--redis-url` names one.
//!
//! ```text
//! cargo run --example leader
//! cargo run --example leader -- --lease-ms 1000
//! ```
//!
//! Files: `main.rs` (options and the parent), `replica.rs` (one replica process).

mod replica;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use clap::{Args, Parser, Subcommand};
use lock_testkit::RedisServer;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// The error type of the example's own plumbing.
type Error = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Three replicas elect a leader; the leader is paused, then killed.
#[derive(Debug, Parser)]
struct Cli {
    #[command(flatten)]
    run: RunArgs,
    #[command(subcommand)]
    command: Option<Cmd>,
}

#[derive(Debug, Args)]
struct RunArgs {
    /// The leader's lease, in milliseconds: renewed every third of it; a failed leader is
    /// replaced about this long after it stopped.
    #[arg(long, default_value_t = 2000)]
    lease_ms: u64,
    /// Redis to elect on; without it a throwaway redis-server is started.
    #[arg(long, value_name = "URL", visible_alias = "url", env = "REDIS_URL")]
    redis_url: Option<String>,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// One replica process (started by the parent).
    #[command(hide = true)]
    Replica(replica::ReplicaArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Some(Cmd::Replica(args)) => replica::main(&args).map(|()| ExitCode::SUCCESS),
        None => parent(&cli.run),
    };
    result.unwrap_or_else(|error| {
        eprintln!("error: {error}");
        ExitCode::from(2)
    })
}

/// One line a replica printed: what, which replica, which term, and the rest.
#[derive(Debug, Clone)]
struct Line {
    what: String,
    id: usize,
    term: u64,
    rest: String,
}

fn parse(line: &str) -> Option<Line> {
    let mut words = line.splitn(4, ' ');
    Some(Line {
        what: words.next()?.to_owned(),
        id: words.next()?.parse().ok()?,
        term: words.next()?.parse().ok()?,
        rest: words.next().unwrap_or("").to_owned(),
    })
}

/// The parent's view of the run: every line so far, in arrival order.
struct Replicas {
    children: Vec<Child>,
    lines: mpsc::Receiver<Line>,
    seen: Vec<Line>,
}

impl Replicas {
    /// Reads lines, printing the interesting ones, until one matches `want` or `limit` passes.
    fn wait_for(&mut self, limit: Duration, want: impl Fn(&Line) -> bool) -> Option<Line> {
        let deadline = Instant::now() + limit;
        while let Ok(line) = self
            .lines
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
        {
            if line.what != "wrote" || line.rest != "ok" {
                println!(
                    "  replica {} {} (term {}) {}",
                    line.id, line.what, line.term, line.rest
                );
            }
            self.seen.push(line.clone());
            if want(&line) {
                return Some(line);
            }
        }
        None
    }

    fn signal(&self, id: usize, signal: Signal) -> Result<(), Error> {
        let pid = i32::try_from(self.children[id].id())?;
        kill(Pid::from_raw(pid), signal)?;
        Ok(())
    }
}

fn parent(args: &RunArgs) -> Result<ExitCode, Error> {
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
    let (send, lines) = mpsc::channel::<Line>();
    let mut children = Vec::new();
    for id in 0..3 {
        let mut child = Command::new(std::env::current_exe()?)
            .args(["replica", "--redis-url", &url, "--id", &id.to_string()])
            .args(["--lease-ms", &args.lease_ms.to_string()])
            .stdout(Stdio::piped())
            .spawn()?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let send = send.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(line) = parse(&line)
                    && send.send(line).is_err()
                {
                    break;
                }
            }
        });
        children.push(child);
    }
    let mut replicas = Replicas {
        children,
        lines,
        seen: Vec::new(),
    };
    let result = story(&mut replicas, lease);
    for child in &mut replicas.children {
        let _ = child.kill();
        let _ = child.wait();
    }
    result
}

/// The pause, the kill, and the checks.
fn story(replicas: &mut Replicas, lease: Duration) -> Result<ExitCode, Error> {
    let long = lease * 3 + Duration::from_secs(10);
    println!("three replicas campaign (lease {lease:?})");
    let first = replicas
        .wait_for(long, |l| l.what == "started")
        .ok_or("nobody was elected")?;
    replicas.wait_for(long, |l| l.what == "wrote" && l.term == first.term);

    println!("pausing replica {} (SIGSTOP) for the lease + 1 s", first.id);
    replicas.signal(first.id, Signal::SIGSTOP)?;
    let paused = Instant::now();
    let second = replicas
        .wait_for(long, |l| l.what == "started" && l.term > first.term)
        .ok_or("nobody took over from the paused leader")?;
    println!(
        "  → replica {} leads {:?} after the pause",
        second.id,
        paused.elapsed()
    );
    std::thread::sleep((lease + Duration::from_secs(1)).saturating_sub(paused.elapsed()));
    println!("waking replica {} (SIGCONT)", first.id);
    replicas.signal(first.id, Signal::SIGCONT)?;
    let ended = replicas
        .wait_for(long, |l| l.what == "ended" && l.id == first.id)
        .ok_or("the paused leader never noticed its term ended")?;
    // `Lost`: its `lost()` fired and the run cancelled its work.
    let lost = ended.rest == "Lost";

    println!("killing replica {} (SIGKILL)", second.id);
    replicas.children[second.id].kill()?;
    let killed = Instant::now();
    let third = replicas
        .wait_for(long, |l| l.what == "started" && l.term > second.term)
        .ok_or("nobody took over from the killed leader")?;
    println!(
        "  → replica {} leads {:?} after the kill",
        third.id,
        killed.elapsed()
    );
    replicas.wait_for(Duration::from_millis(500), |_| false);

    // The checks: terms only grew, and the paused leader's term ended as lost.
    let starts: Vec<u64> = replicas
        .seen
        .iter()
        .filter(|l| l.what == "started")
        .map(|l| l.term)
        .collect();
    let ordered = starts.windows(2).all(|w| w[0] < w[1]);
    let late: Vec<&Line> = replicas
        .seen
        .iter()
        .filter(|l| l.what == "wrote" && l.rest == "rejected")
        .collect();
    println!(
        "terms {starts:?}: {}; {} late write(s) rejected by the resource (older terms)",
        if ordered {
            "strictly increasing"
        } else {
            "NOT INCREASING"
        },
        late.len()
    );
    Ok(if ordered && lost {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
