//! The load tool's options, and the plan they make.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, ValueEnum};
use serde::Serialize;

use crate::child::Role;
use crate::window::Timing;

/// distlock's load tool: starts its own redis-server processes (and, for the P parts, one
/// PostgreSQL server) on free loopback ports, runs the scenarios S1–S10 (and S1, S3, S5, S7,
/// S8, S10 on PostgreSQL: P1, P3, P5, P7, P8, P10) against distlock and, in the same run,
/// against the baselines (redis-benchmark and pgbench on the same server; a hand-written
/// redis-rs lock; rslock 0.10), then prints a table and writes a JSON record of the run and an
/// SVG chart.
#[derive(Debug, Parser)]
#[command(name = "loadtool", version)]
pub(crate) struct Cli {
    /// A short run (~40 s) with smaller samples, written to target/loadtool-quick/ by default.
    #[arg(long)]
    pub(crate) quick: bool,

    /// Where to write run.json and chart.svg (default: benches/results/ for a full run — the
    /// committed reference — and target/loadtool-quick/ for --quick).
    #[arg(long, value_name = "DIR")]
    pub(crate) out: Option<PathBuf>,

    /// Run only these parts (comma-separated: baseline, s1, s2, s3, s4, s5, s6, s7, s8, s9,
    /// s10, valkey (S1 and S2 on Redis and Valkey, alternating); p1, p3, p5, p7, p8, p10 — S1, S3, S5, S7, S8 and S10 on PostgreSQL, P1 with its
    /// pgbench baselines; m1, m2 — S1 and S2 on MariaDB against a hand-written lock).
    /// pgbench baselines; o1, o2, o-takeover, o5 — S1, S2, the takeover and S5 on object
    /// storage); c1, c2 — the cost curves, held locks and waiters (minutes; not in the
    /// default run).
    #[arg(long, value_delimiter = ',', value_name = "PARTS")]
    pub(crate) only: Vec<Part>,

    /// The tokio runtime the clients run on.
    #[arg(long, value_enum, default_value_t = Flavor::MultiThread)]
    pub(crate) runtime: Flavor,

    /// Seconds each S1, S2 and S4 client is measured (default 3, or 1 with --quick); S3, S7,
    /// S8 and S10 get a third more.
    #[arg(long, value_name = "SECONDS")]
    pub(crate) seconds: Option<f64>,

    /// Locks held in S5, read leases held in S9.
    #[arg(long, default_value_t = 10_000)]
    pub(crate) s5_locks: usize,

    /// The lease in S5 and S9, in seconds (default 3, or 2 with --quick; CPU is also reported scaled
    /// to the 30 s lease of the target). Give 30 to measure that lease directly.
    #[arg(long, value_name = "SECONDS")]
    pub(crate) s5_lease: Option<f64>,

    /// Lease periods S5 and S9 hold their leases for (default 3, or 2 with --quick).
    #[arg(long)]
    pub(crate) s5_periods: Option<u32>,

    /// Cycles of each of S4's counting passes (own leases still on a node), per client and
    /// node count (default 4,000, or 1,000 with --quick); reported per 20,000 cycles.
    #[arg(long, value_name = "CYCLES")]
    pub(crate) s4_count_cycles: Option<u64>,

    /// Waiters in S6.
    #[arg(long, default_value_t = 1_000)]
    pub(crate) s6_waiters: usize,

    /// The cost curves' settings (`--only c1,c2`).
    #[command(flatten)]
    pub(crate) curves: crate::curve_plan::CurveArgs,

    /// Exit with status 2 when a target is missed (status 1 is for failures: errors, lost
    /// updates, broken exclusion).
    #[arg(long)]
    pub(crate) strict: bool,

    /// Internal: run as a child process of the tool (S5, S9, S10), in this role.
    #[arg(long, hide = true, value_enum, value_name = "ROLE")]
    pub(crate) child: Option<Role>,

    /// Internal: the child's Redis URL.
    #[arg(long, hide = true, value_name = "URL")]
    pub(crate) child_url: Option<String>,

    /// Internal: the child's parameters (JSON).
    #[arg(long, hide = true)]
    pub(crate) child_params: Option<String>,
}

/// The parts of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Part {
    Baseline,
    S1,
    S2,
    S3,
    S4,
    S5,
    S6,
    S7,
    S8,
    S9,
    S10,
    /// S1 and S2 on the run's redis-server and on a Valkey server (`scripts/ensure-valkey.sh`),
    /// in alternating rounds (the Redis-and-Valkey comparison).
    Valkey,
    /// S1 on PostgreSQL (both modes), interleaved with pgbench on the bare statements.
    P1,
    /// S3 on PostgreSQL (both modes).
    P3,
    /// S5 on PostgreSQL's lease table.
    P5,
    /// S7 on PostgreSQL's lease table: the read-write lock against the exclusive lock.
    P7,
    /// S8 on PostgreSQL's lease table: the semaphore.
    P8,
    /// S10 on PostgreSQL's lease table: the plain and the fair lock across processes.
    P10,
    /// S1 on etcd (`EtcdLock`), interleaved with the bare etcd transactions it sends.
    E1,
    /// S2 on etcd: 32 tasks, each its own name, interleaved with the bare transactions.
    E2,
    /// S3 on etcd: 8 workers on one name.
    E3,
    /// S5 on etcd: 10,000 locks held with renewal; keep-alive traffic and CPU per lease period.
    E5,
    /// Failover on a 3-member etcd: the leader killed while a task takes and releases the
    /// lock; the time from the kill to the next grant.
    EFailover,
    /// S1 on MariaDB (`MysqlLock`'s lease table), interleaved with the hand-written MySQL lock
    /// on the same server and client.
    M1,
    /// S2 on MariaDB: S2's tasks, each its own name, interleaved with the hand-written lock.
    M2,
    /// S1 on object storage (`ObjectStoreLock` on SeaweedFS), interleaved with the hand-written
    /// lock (`PUT If-None-Match: *` + `DELETE`) on the same server and client.
    O1,
    /// S2 on object storage: S2's tasks, each its own name, interleaved with the hand-written
    /// lock.
    O2,
    /// Object storage: a holder dies, a contender takes over; the excess over one lease.
    OTakeover,
    /// S5 on object storage: locks held with renewal; requests per lock per lease period.
    O5,
    /// Cost curve: renewed locks held, 1,000 → 100,000, per backend (client and server CPU
    /// and memory). Not in the default run (minutes).
    C1,
    /// Cost curve: waiters on one name, 10 → 10,000 (commands, gap and wake-ups per
    /// release). Not in the default run.
    C2,
}

impl Part {
    /// The parts run on a PostgreSQL server.
    pub(crate) const POSTGRES: [Part; 6] =
        [Part::P1, Part::P3, Part::P5, Part::P7, Part::P8, Part::P10];
    /// The parts run on etcd.
    pub(crate) const ETCD: [Part; 5] = [Part::E1, Part::E2, Part::E3, Part::E5, Part::EFailover];
    /// The parts run on MariaDB.
    pub(crate) const MYSQL: [Part; 2] = [Part::M1, Part::M2];
    /// The parts run on object storage (SeaweedFS).
    pub(crate) const OBJECT_STORE: [Part; 4] = [Part::O1, Part::O2, Part::OTakeover, Part::O5];
}

/// The tokio runtime flavour.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Flavor {
    /// `#[tokio::main]`'s default: one worker thread per core.
    MultiThread,
    /// One thread.
    CurrentThread,
}

impl Flavor {
    pub(crate) fn as_arg(self) -> &'static str {
        match self {
            Self::MultiThread => "multi-thread",
            Self::CurrentThread => "current-thread",
        }
    }

    pub(crate) fn runtime(self) -> std::io::Result<tokio::runtime::Runtime> {
        match self {
            Self::MultiThread => tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build(),
            Self::CurrentThread => tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build(),
        }
    }
}

/// What a run does, with every number the options decide.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Plan {
    pub(crate) mode: &'static str,
    pub(crate) runtime: Flavor,
    pub(crate) parts: Vec<Part>,
    /// S1 (in all, over its rounds), S2, S4.
    pub(crate) cycles: Timing,
    /// S1 runs in this many rounds, each with the two redis-benchmark runs of the round-trip
    /// limit followed by every client.
    pub(crate) s1_rounds: u32,
    /// The `valkey` part's rounds per scenario and server, and each round's window.
    pub(crate) server_rounds: u32,
    pub(crate) server_round: Timing,
    /// S3, S7, S8 and S10 (each workload), and their PostgreSQL forms.
    pub(crate) contention: Timing,
    pub(crate) s2_tasks: usize,
    pub(crate) s3_workers: usize,
    /// How long S3's, S7's, S8's and S10's tasks hold.
    #[serde(serialize_with = "crate::stats::secs")]
    pub(crate) s3_hold: Duration,
    pub(crate) bench_requests_single: u64,
    pub(crate) bench_requests_pipelined: u64,
    /// Cycles of each of S4's counting passes (own leases still on a node).
    pub(crate) s4_count_cycles: u64,
    pub(crate) s5_locks: usize,
    #[serde(serialize_with = "crate::stats::secs")]
    pub(crate) s5_lease: Duration,
    pub(crate) s5_periods: u32,
    pub(crate) s6_waiters: usize,
    pub(crate) s7_tasks: usize,
    /// The share of S7's acquisitions that write.
    pub(crate) s7_writes: f64,
    pub(crate) s8_tasks: usize,
    pub(crate) s8_permits: u32,
    /// S10: OS processes, each with its own `Locker`, and tasks in each.
    pub(crate) s10_processes: usize,
    pub(crate) s10_tasks: usize,
    /// The cost curves' points and backends (C1, C2).
    pub(crate) curves: crate::curve_plan::CurvePlan,
    /// Where the files go (not recorded: a path of this machine).
    #[serde(skip)]
    pub(crate) out: PathBuf,
}

impl Plan {
    pub(crate) fn from_cli(cli: &Cli) -> Result<Self, String> {
        let quick = cli.quick;
        let seconds = cli.seconds.unwrap_or(if quick { 1.0 } else { 3.0 });
        if !(0.1..=600.0).contains(&seconds) {
            return Err("--seconds must be between 0.1 and 600".into());
        }
        let measure = Duration::from_secs_f64(seconds);
        let warmup = Duration::from_secs_f64((seconds / 6.0).clamp(0.2, 1.0));
        let s5_lease = cli.s5_lease.unwrap_or(if quick { 2.0 } else { 3.0 });
        if !(0.3..=600.0).contains(&s5_lease) {
            return Err("--s5-lease must be between 0.3 and 600 seconds".into());
        }
        if !(1..=100_000).contains(&cli.s5_locks) || !(1..=100_000).contains(&cli.s6_waiters) {
            return Err("--s5-locks and --s6-waiters must be between 1 and 100,000".into());
        }
        let s4_count_cycles = cli
            .s4_count_cycles
            .unwrap_or(if quick { 1_000 } else { 4_000 });
        if !(1..=1_000_000).contains(&s4_count_cycles) {
            return Err("--s4-count-cycles must be between 1 and 1,000,000".into());
        }
        let s5_periods = cli.s5_periods.unwrap_or(if quick { 2 } else { 3 });
        if !(1..=20).contains(&s5_periods) {
            return Err("--s5-periods must be between 1 and 20".into());
        }
        let package = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let out = cli.out.clone().unwrap_or_else(|| {
            if quick {
                package
                    .parent()
                    .unwrap_or(&package)
                    .join("target/loadtool-quick")
            } else {
                package.join("results")
            }
        });
        let parts = if cli.only.is_empty() {
            vec![
                Part::Baseline,
                Part::S1,
                Part::S2,
                Part::S3,
                Part::S4,
                Part::S5,
                Part::S6,
                Part::S7,
                Part::S8,
                Part::S9,
                Part::S10,
                Part::Valkey,
                Part::P1,
                Part::P3,
                Part::P5,
                Part::P7,
                Part::P8,
                Part::P10,
                Part::E1,
                Part::E2,
                Part::E3,
                Part::E5,
                Part::EFailover,
                Part::M1,
                Part::M2,
                Part::O1,
                Part::O2,
                Part::OTakeover,
                Part::O5,
            ]
        } else {
            cli.only.clone()
        };
        Ok(Self {
            mode: if quick { "quick" } else { "full" },
            runtime: cli.runtime,
            parts,
            cycles: Timing { warmup, measure },
            s1_rounds: if quick { 1 } else { 3 },
            server_rounds: if quick { 3 } else { 5 },
            server_round: Timing {
                warmup: warmup / 2,
                measure: measure / 3,
            },
            contention: Timing {
                warmup,
                measure: measure.mul_f64(4.0 / 3.0),
            },
            s2_tasks: 32,
            s3_workers: 8,
            s3_hold: Duration::from_millis(1),
            bench_requests_single: if quick { 5_000 } else { 20_000 },
            bench_requests_pipelined: if quick { 100_000 } else { 300_000 },
            s4_count_cycles,
            s5_locks: cli.s5_locks,
            s5_lease: Duration::from_secs_f64(s5_lease),
            s5_periods,
            s6_waiters: cli.s6_waiters,
            s7_tasks: 16,
            s7_writes: 0.10,
            s8_tasks: 32,
            s8_permits: 8,
            s10_processes: 4,
            s10_tasks: 4,
            curves: cli.curves.plan()?,
            out,
        })
    }

    pub(crate) fn has(&self, part: Part) -> bool {
        self.parts.contains(&part)
    }

    /// Whether any part runs on PostgreSQL.
    pub(crate) fn has_postgres(&self) -> bool {
        Part::POSTGRES.iter().any(|p| self.has(*p))
    }

    /// Whether any part runs on etcd.
    pub(crate) fn has_etcd(&self) -> bool {
        Part::ETCD.iter().any(|p| self.has(*p))
    }

    /// Whether any MariaDB part runs.
    pub(crate) fn has_mysql(&self) -> bool {
        Part::MYSQL.iter().any(|p| self.has(*p))
    }

    /// Whether any object-storage part runs.
    pub(crate) fn has_object_store(&self) -> bool {
        Part::OBJECT_STORE.iter().any(|p| self.has(*p))
    }

    /// How many holders the object-storage takeover lets die.
    pub(crate) fn takeovers(&self) -> usize {
        if self.mode == "quick" { 3 } else { 5 }
    }

    /// How many times the failover part kills the leader.
    pub(crate) fn failovers(&self) -> usize {
        if self.mode == "quick" { 3 } else { 10 }
    }
}
