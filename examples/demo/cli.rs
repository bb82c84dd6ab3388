//! The command line: the demo's options, and the hidden `worker` subcommand the demo starts its
//! own worker processes with.

use std::time::Duration;

use clap::{Args, Parser, Subcommand, value_parser};

/// Worker processes contend for one distlock lock on Redis and update a fenced resource.
#[derive(Debug, Parser)]
#[command(name = "demo", args_conflicts_with_subcommands = true)]
pub(crate) struct Cli {
    /// Set only in worker processes.
    #[command(subcommand)]
    pub(crate) command: Option<Command>,

    /// The options of a demo run.
    #[command(flatten)]
    pub(crate) run: RunArgs,
}

/// The subcommands; only the hidden `worker`.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Runs one worker (the demo starts these itself).
    #[command(hide = true)]
    Worker(WorkerArgs),
}

/// The options of a demo run.
#[derive(Debug, Clone, Args)]
pub(crate) struct RunArgs {
    /// How many worker processes contend for the lock (at least 2, so one can take over from
    /// a stalled one).
    #[arg(long, default_value_t = 4, value_parser = value_parser!(u32).range(2..=64))]
    pub(crate) workers: u32,

    /// How long the workers run, in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 8, value_parser = value_parser!(u64).range(1..=3600))]
    pub(crate) duration: u64,

    /// The lease TTL of every acquisition, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 500, value_parser = value_parser!(u64).range(1..=60_000))]
    pub(crate) ttl_ms: u64,

    /// How long a holder sleeps between reading and writing the counter, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 2, value_parser = value_parser!(u64).range(0..=60_000))]
    pub(crate) hold_ms: u64,

    /// Every Nth acquisition of a worker simulates a stall that outlives the lease (0: never).
    #[arg(long, value_name = "N", default_value_t = 25)]
    pub(crate) pause_every: u64,

    /// How long one acquisition waits for the lock before giving up, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 5_000, value_parser = value_parser!(u64).range(1..=60_000))]
    pub(crate) wait_ms: u64,

    /// Take the lock with `locker.fair(..)`: granted in the order the workers asked (a queue in
    /// Redis), instead of to whoever asks first after a release.
    #[arg(long, conflicts_with = "compare")]
    pub(crate) fair: bool,

    /// Run twice, the plain lock and then the fair lock, each for --duration, and print the
    /// workers' spreads side by side.
    #[arg(long)]
    pub(crate) compare: bool,

    /// Use this Redis server (>= 7.0) instead of starting a throwaway one. Only the demo's keys
    /// are touched: demo:ledger, demo:inside, demo:counter and demo:resource (and distlock's
    /// keys of the lock demo:ledger: its fencing counter and fair queue).
    #[arg(long, value_name = "URL", visible_alias = "url", env = "REDIS_URL")]
    pub(crate) redis_url: Option<String>,
}

/// The parameters of one worker process, passed on its command line by the parent.
#[derive(Debug, Clone, Args)]
pub(crate) struct WorkerArgs {
    /// The worker's number, from 0.
    #[arg(long)]
    pub(crate) index: u32,

    /// The Redis server.
    #[arg(long)]
    pub(crate) redis_url: String,

    /// When to stop, in milliseconds since the Unix epoch (the same instant for every worker).
    #[arg(long)]
    pub(crate) deadline_unix_ms: u64,

    /// The lease TTL, in milliseconds.
    #[arg(long, value_parser = value_parser!(u64).range(1..))]
    pub(crate) ttl_ms: u64,

    /// The sleep inside the counter's read-modify-write, in milliseconds.
    #[arg(long)]
    pub(crate) hold_ms: u64,

    /// Every Nth acquisition simulates a stall (0: never).
    #[arg(long)]
    pub(crate) pause_every: u64,

    /// The wait of one acquisition, in milliseconds.
    #[arg(long, value_parser = value_parser!(u64).range(1..))]
    pub(crate) wait_ms: u64,

    /// Take the fair lock (`locker.fair`) instead of the plain one (`locker.lock`).
    #[arg(long)]
    pub(crate) fair: bool,
}

impl WorkerArgs {
    /// The arguments that run this worker: `worker --index ... --wait-ms ...`.
    pub(crate) fn to_command_line(&self) -> Vec<String> {
        let mut line = vec!["worker".to_owned()];
        let mut push = |name: &str, value: String| {
            line.push(format!("--{name}"));
            line.push(value);
        };
        push("index", self.index.to_string());
        push("redis-url", self.redis_url.clone());
        push("deadline-unix-ms", self.deadline_unix_ms.to_string());
        push("ttl-ms", self.ttl_ms.to_string());
        push("hold-ms", self.hold_ms.to_string());
        push("pause-every", self.pause_every.to_string());
        push("wait-ms", self.wait_ms.to_string());
        if self.fair {
            line.push("--fair".to_owned());
        }
        line
    }

    /// The lease TTL.
    pub(crate) fn ttl(&self) -> Duration {
        Duration::from_millis(self.ttl_ms)
    }
}

impl RunArgs {
    /// How long the workers run.
    pub(crate) fn duration(&self) -> Duration {
        Duration::from_secs(self.duration)
    }

    /// The runs to make, one per lock: `[false]` (plain), `[true]` (`--fair`), or both
    /// (`--compare`); `true` means fair.
    pub(crate) fn modes(&self) -> Vec<bool> {
        if self.compare {
            vec![false, true]
        } else {
            vec![self.fair]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worker_command_line_round_trips() {
        for fair in [false, true] {
            let args = WorkerArgs {
                index: 3,
                redis_url: "redis://127.0.0.1:7000/".to_owned(),
                deadline_unix_ms: 1_700_000_000_000,
                ttl_ms: 500,
                hold_ms: 2,
                pause_every: 25,
                wait_ms: 5_000,
                fair,
            };
            let mut argv = vec!["demo".to_owned()];
            argv.extend(args.to_command_line());
            let parsed = Cli::try_parse_from(argv).expect("the worker command line parses");
            let Some(Command::Worker(back)) = parsed.command else {
                panic!("not parsed as a worker: {parsed:?}");
            };
            assert_eq!(back.fair, fair);
            assert_eq!(back.to_command_line(), args.to_command_line());
        }
    }

    #[test]
    fn modes() {
        let modes = |argv: &[&str]| Cli::try_parse_from(argv).map(|cli| cli.run.modes());
        assert_eq!(modes(&["demo"]).expect("parses"), [false]);
        assert_eq!(modes(&["demo", "--fair"]).expect("parses"), [true]);
        assert_eq!(
            modes(&["demo", "--compare"]).expect("parses"),
            [false, true]
        );
        assert!(modes(&["demo", "--fair", "--compare"]).is_err());
    }

    #[test]
    fn defaults() {
        let cli = Cli::try_parse_from(["demo"]).expect("no arguments parse");
        assert!(cli.command.is_none());
        assert_eq!(
            (cli.run.workers, cli.run.duration, cli.run.ttl_ms),
            (4, 8, 500)
        );
        assert_eq!((cli.run.hold_ms, cli.run.pause_every), (2, 25));
        assert!(cli.run.redis_url.is_none());
        assert!(!cli.run.fair && !cli.run.compare);
    }
}
