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
//! 2. **killed** (SIGKILL): another replica is elected once the lease runs out;
//! 3. **stopped** (SIGTERM, what Kubernetes and systemd send): the replica's run is tied to it
//!    (`run.stop_on(distlock::shutdown())`), so it gives its term up at once and another
//!    replica is elected within a round trip or two.
//!
//! It prints each replica's terms and rejected writes as they come and the **failover times**
//! after the kill and after the SIGTERM (from the signal to the next leader's start, on the
//! machine's monotonic clock), then checks that the terms only grew, that the paused leader's
//! term ended as lost and the stopped one's as stopped; exits 1 if not.
//!
//! The election runs on Redis (`RedisLock`), or with `--backend postgres` on PostgreSQL
//! (`PostgresLock`) or with `--backend etcd` on etcd (`EtcdLock`): the same election code on
//! each, only the `Locker`'s construction differs. The fenced resource stays on Redis. Starts a
//! throwaway `redis-server` (through `lock-testkit`) unless `--redis-url` names one, and a
//! throwaway PostgreSQL or etcd for those backends unless `--postgres-url` or `--etcd-url`
//! names one.
//!
//! ```text
//! cargo run --example leader
//! cargo run --example leader -- --lease-ms 1000
//! cargo run --example leader -- --backend postgres
//! cargo run --example leader -- --backend etcd
//! ```
//!
//! Files: `main.rs` (options and the parent), `backend.rs` (the three backends' servers and
//! lockers), `clock.rs` (the clock the failover is timed on), `replica.rs` (one replica
//! process).

mod backend;
mod clock;
mod replica;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use backend::{Backend, LockServer};
use clap::{Args, Parser, Subcommand};
use distlock::redis::RedisFences;
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
    /// replaced about this long after it stopped. At least 2000 on etcd, which counts leases
    /// in whole seconds.
    #[arg(long, default_value_t = 2000)]
    lease_ms: u64,
    /// Where the election runs: `redis`, `postgres` (a throwaway PostgreSQL unless
    /// --postgres-url) or `etcd` (a throwaway one-member etcd unless --etcd-url). The fenced
    /// resource stays on Redis.
    #[arg(long, value_enum, default_value_t = Backend::Redis)]
    backend: Backend,
    /// Redis of the fenced resource (and of the election on `--backend redis`); without it a
    /// throwaway redis-server is started. Only the example's keys are touched.
    #[arg(long, value_name = "URL", visible_alias = "url", env = "REDIS_URL")]
    redis_url: Option<String>,
    /// With --backend postgres: this PostgreSQL (>= 12) instead of a throwaway one (the lease
    /// table is created if missing).
    #[arg(long, value_name = "URL")]
    postgres_url: Option<String>,
    /// With --backend etcd: these etcd endpoints (comma separated) instead of a throwaway one.
    #[arg(long, value_name = "URLS")]
    etcd_url: Option<String>,
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

/// One line a replica printed: what, which replica, which term, and the rest (for `started`,
/// when, in nanoseconds on [`clock::now_ns`]).
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
            if line.what == "started" {
                println!("  replica {} started (term {})", line.id, line.term);
            } else if line.what != "wrote" || line.rest != "ok" {
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

/// When a line of `started` says its term began, on [`clock::now_ns`].
fn started_ns(line: &Line) -> Option<u64> {
    line.rest.parse().ok()
}

/// Clears the fenced resource and its fence record: a run on another backend (or on a
/// throwaway server of the same one) starts its terms over, and they would be refused below
/// the last run's.
fn clear_resource(url: &str) -> Result<(), Error> {
    let mut conn = redis::Client::open(url)?.get_connection()?;
    let record = RedisFences::record_key(replica::RESOURCE)?;
    let _: i64 = redis::cmd("DEL")
        .arg(replica::RESOURCE)
        .arg(record)
        .query(&mut conn)?;
    Ok(())
}

fn parent(args: &RunArgs) -> Result<ExitCode, Error> {
    if args.lease_ms < args.backend.min_lease_ms() {
        return Err(format!(
            "--lease-ms {} is below {}'s shortest lease, {} ms",
            args.lease_ms,
            args.backend.as_str(),
            args.backend.min_lease_ms()
        )
        .into());
    }
    // The throwaway servers come from the workspace's unpublished test kit; in your own
    // project keep only the URLs.
    let (_server, url) = match &args.redis_url {
        Some(url) => (None, url.clone()),
        None => {
            let server = RedisServer::start()?;
            let url = server.url();
            (Some(server), url)
        }
    };
    clear_resource(&url)?;
    let lock_url = match args.backend {
        Backend::Redis => None,
        Backend::Postgres => args.postgres_url.as_deref(),
        Backend::Etcd => args.etcd_url.as_deref(),
    };
    let lock_server = LockServer::start(args.backend, lock_url)?;
    println!("election on {}", lock_server.describe(&url));
    let lease = Duration::from_millis(args.lease_ms);
    let (send, lines) = mpsc::channel::<Line>();
    let mut children = Vec::new();
    for id in 0..3 {
        let mut child = Command::new(std::env::current_exe()?)
            .args(["replica", "--redis-url", &url, "--id", &id.to_string()])
            .args(["--lease-ms", &args.lease_ms.to_string()])
            .args(["--backend", args.backend.as_str()])
            .args(lock_url_arg(&lock_server))
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
    let result = story(&mut replicas, lease, args.backend);
    for child in &mut replicas.children {
        let _ = child.kill();
        let _ = child.wait();
    }
    result
}

/// `--lock-url URL` for the replicas when the backend has a server of its own.
fn lock_url_arg(server: &LockServer) -> Vec<String> {
    server
        .url()
        .map(|url| vec!["--lock-url".to_owned(), url.to_owned()])
        .unwrap_or_default()
}

/// How long after `from_ns` (on [`clock::now_ns`]) the term of `started` began.
fn since(from_ns: u64, started: &Line) -> Duration {
    Duration::from_nanos(
        started_ns(started)
            .unwrap_or(from_ns)
            .saturating_sub(from_ns),
    )
}

/// The pause, the kill, and the checks.
fn story(replicas: &mut Replicas, lease: Duration, backend: Backend) -> Result<ExitCode, Error> {
    let long = lease * 3 + Duration::from_secs(10);
    println!("three replicas campaign (lease {lease:?})");
    let first = replicas
        .wait_for(long, |l| l.what == "started")
        .ok_or("nobody was elected")?;
    replicas.wait_for(long, |l| l.what == "wrote" && l.term == first.term);

    println!("pausing replica {} (SIGSTOP) for the lease + 1 s", first.id);
    let paused_ns = clock::now_ns();
    replicas.signal(first.id, Signal::SIGSTOP)?;
    let paused = Instant::now();
    let second = replicas
        .wait_for(long, |l| l.what == "started" && l.term > first.term)
        .ok_or("nobody took over from the paused leader")?;
    let after_pause = since(paused_ns, &second);
    println!(
        "  → replica {} leads {after_pause:?} after the pause",
        second.id
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
    let killed_ns = clock::now_ns();
    replicas.children[second.id].kill()?;
    let third = replicas
        .wait_for(long, |l| l.what == "started" && l.term > second.term)
        .ok_or("nobody took over from the killed leader")?;
    let failover = since(killed_ns, &third);
    println!("  → replica {} leads {failover:?} after the kill", third.id);

    println!("stopping replica {} (SIGTERM)", third.id);
    let termed_ns = clock::now_ns();
    replicas.signal(third.id, Signal::SIGTERM)?;
    let fourth = replicas
        .wait_for(long, |l| l.what == "started" && l.term > third.term)
        .ok_or("nobody took over from the stopped leader")?;
    let handoff = since(termed_ns, &fourth);
    println!(
        "  → replica {} leads {handoff:?} after the SIGTERM",
        fourth.id
    );
    let stopped = replicas
        .wait_for(long, |l| l.what == "ended" && l.id == third.id)
        .is_some_and(|l| l.rest == "Stopped");
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
    println!(
        "failover after the kill: {:.0} ms (after the pause: {:.0} ms; after a SIGTERM: {:.1} ms), lease {} ms, on {}",
        failover.as_secs_f64() * 1e3,
        after_pause.as_secs_f64() * 1e3,
        handoff.as_secs_f64() * 1e3,
        lease.as_millis(),
        backend.as_str()
    );
    Ok(if ordered && lost && stopped {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
