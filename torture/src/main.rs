//! `torture`: runs distlock's torture scenarios and prints the checker's report.
//!
//! ```text
//! cargo run --release -p distlock-torture -- --scenario all --duration 60s
//! ```

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use distlock_torture::worker::{Misbehave, Workload};
use distlock_torture::{Options, Server, report, run, scenario};

/// Runs distlock's torture scenarios: worker processes contend for a lock on real
/// redis-servers while faults are injected, and a checker judges the recorded history.
#[derive(Debug, Parser)]
#[command(name = "torture")]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// A scenario name, `all`, `postgres` (the scenarios on PostgreSQL), `etcd` (those on a
    /// 3-member etcd cluster), `s3` (those on SeaweedFS), `clock` (clocks that jump and run
    /// fast, every backend), `kinds` (the lock kinds on Redis, MariaDB and etcd) or `multi`
    /// (the multi-lock, every backend).
    #[arg(long, default_value = "all")]
    scenario: String,
    /// How long each scenario runs (e.g. `60s`, `5m`); default: its short CI form.
    #[arg(long, value_parser = humantime::parse_duration)]
    duration: Option<Duration>,
    /// Worker processes per scenario (default: the scenario's).
    #[arg(long)]
    workers: Option<u32>,
    /// Keep histories, configs and worker logs under this directory (one sub-directory per
    /// scenario).
    #[arg(long)]
    keep: Option<PathBuf>,
    /// List the scenarios and their expected verdicts, and exit.
    #[arg(long)]
    list: bool,
    /// Do not print each step as it runs.
    #[arg(long)]
    quiet: bool,
    /// The workers' store grace period (e.g. `1s`; default: each scenario's, its lease);
    /// `0s` turns it off, to measure the scenarios as they were without it.
    #[arg(long, value_parser = humantime::parse_duration)]
    grace: Option<Duration>,
    /// The workers run the strict data-loss checks (`RedisLockBuilder::strict`).
    #[arg(long)]
    strict: bool,
    /// A broken variant for the checker's tests: `unfenced` (every write bypasses the fence)
    /// or `rogue-grant` (worker 0 holds another name as if it held the lock). The verdicts
    /// must then be violated.
    #[arg(long, value_enum, default_value_t = Misbehave::None)]
    misbehave: Misbehave,
    /// The server of the lock's Redis stores in single-server, Redlock and cluster scenarios.
    #[arg(long, value_enum, default_value_t = ServerArg::Redis)]
    server: ServerArg,
}

/// `--server`: `redis` (redis-server) or `valkey` (valkey-server).
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum ServerArg {
    Redis,
    Valkey,
}

impl From<ServerArg> for Server {
    fn from(arg: ServerArg) -> Server {
        match arg {
            ServerArg::Redis => Server::Redis,
            ServerArg::Valkey => Server::Valkey,
        }
    }
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Judges a run kept with `--keep` again, against the verdict of the scenario named like
    /// the directory (or given with `--scenario`).
    Check {
        /// The scenario's directory (`KEEP/<scenario>`).
        dir: PathBuf,
        /// Also list every overlap found.
        #[arg(long)]
        overlaps: bool,
    },
    /// Runs one worker process (started by the runner, not by hand).
    #[command(hide = true)]
    Worker {
        /// The worker's JSON config.
        #[arg(long)]
        config: PathBuf,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Some(Command::Worker { config }) = &cli.command {
        return match distlock_torture::worker::run_from_file(config) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("worker: {e}");
                ExitCode::FAILURE
            }
        };
    }
    if let Some(Command::Check { dir, overlaps }) = &cli.command {
        return check(dir, *overlaps, &cli.scenario);
    }
    let scenarios = if cli.scenario == "all" {
        scenario::all()
    } else if cli.scenario == "postgres" {
        scenario::all()
            .into_iter()
            .filter(|s| s.topology == scenario::Topology::Postgres)
            .collect()
    } else if cli.scenario == "mysql" {
        scenario::all()
            .into_iter()
            .filter(|s| s.topology == scenario::Topology::Mysql)
            .collect()
    } else if cli.scenario == "s3" {
        scenario::all()
            .into_iter()
            .filter(|s| s.topology == scenario::Topology::ObjectStore)
            .collect()
    } else if cli.scenario == "etcd" {
        scenario::all()
            .into_iter()
            .filter(|s| s.topology == scenario::Topology::Etcd)
            .collect()
    } else if cli.scenario == "clock" {
        scenario::clock_scenarios()
    } else if cli.scenario == "kinds" {
        scenario::kinds_scenarios()
    } else if cli.scenario == "multi" {
        scenario::all()
            .into_iter()
            .filter(|s| matches!(s.workload, Workload::Multi { .. }))
            .collect()
    } else if let Some(s) = scenario::by_name(&cli.scenario) {
        vec![s]
    } else {
        let names: Vec<&str> = scenario::all().iter().map(|s| s.name).collect();
        eprintln!(
            "unknown scenario {:?}; one of: all, postgres, mysql, s3, etcd, clock, kinds, multi, {}",
            cli.scenario,
            names.join(", ")
        );
        return ExitCode::from(2);
    };
    if cli.list {
        for s in &scenarios {
            let e = &s.expected;
            println!(
                "{:28} {}\n{:28} expected: overlaps {}, over permits {}, stale writes accepted {}, stale writes rejected {}, recovery ≤ {:?}\n{:28} why: {}\n",
                s.name,
                s.fault,
                "",
                e.overlaps,
                e.over_permits,
                e.stale_accepted,
                e.stale_rejected,
                e.recovery_within,
                "",
                e.why
            );
        }
        return ExitCode::SUCCESS;
    }
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => {
            eprintln!("cannot find this program's path: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut outcomes = Vec::new();
    let mut failed = false;
    for s in &scenarios {
        let mut s = s.clone();
        if let Some(grace) = cli.grace {
            s.grace = grace;
        }
        s.strict |= cli.strict;
        let s = &s;
        let options = Options {
            exe: exe.clone(),
            duration: cli.duration,
            workers: cli.workers,
            keep: cli.keep.as_ref().map(|k| k.join(s.name)),
            verbose: !cli.quiet,
            server: cli.server.into(),
            misbehave: cli.misbehave,
        };
        match run(s, &options) {
            Ok(outcome) => {
                println!(
                    "\n== {} ({}; {} cycles, {:.1} s)\n{}",
                    s.name,
                    s.fault,
                    outcome.cycles,
                    outcome.wall.as_secs_f64(),
                    report::scenario_table(&outcome)
                );
                for v in &outcome.violations {
                    println!("VIOLATED: {v}");
                }
                failed |= !outcome.passed();
                outcomes.push(outcome);
            }
            Err(e) => {
                eprintln!("{}: the run could not take place: {e}", s.name);
                failed = true;
            }
        }
    }
    println!("\n{}", report::summary_table(&outcomes));
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// `torture check DIR`: the report of a kept run, judged against its scenario's verdict.
fn check(dir: &std::path::Path, list_overlaps: bool, scenario: &str) -> ExitCode {
    let name = if scenario == "all" {
        dir.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    } else {
        scenario.to_owned()
    };
    let Some(scenario) = scenario::by_name(&name) else {
        eprintln!("no scenario named {name:?}: pass --scenario NAME");
        return ExitCode::from(2);
    };
    let (history, snapshot) = match distlock_torture::runner::load(dir) {
        Ok(loaded) => loaded,
        Err(e) => {
            eprintln!("cannot read the run in {}: {e}", dir.display());
            return ExitCode::FAILURE;
        }
    };
    let report = distlock_torture::check(&history, &snapshot);
    println!("{}", report::report_table(&report, &scenario.expected));
    if list_overlaps {
        for o in &report.overlaps {
            println!(
                "worker {} (token {}) and worker {} (token {}) overlapped for {:?}",
                o.first.process,
                o.first.token,
                o.second.process,
                o.second.token,
                Duration::from_nanos(o.overlap_ns)
            );
        }
    }
    let violations = scenario.expected.judge(&report);
    for v in &violations {
        println!("VIOLATED: {v}");
    }
    if violations.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
