//! The command line: the demo's options, and the hidden `worker` subcommand the demo starts its
//! own worker processes with.

use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum, value_parser};

/// Worker processes contend for one distlock lock on Redis or PostgreSQL and update a fenced
/// resource.
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

/// Where the lock lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Backend {
    /// `RedisLock` on the same Redis as the counter and the fenced resource.
    Redis,
    /// `PostgresLock` (a lease table, releases announced with LISTEN/NOTIFY) on PostgreSQL;
    /// the counter and the fenced resource stay on Redis.
    Postgres,
    /// `EtcdLock` (a key per lock, a grant is a committed transaction, releases announced
    /// through a watch) on etcd; the counter and the fenced resource stay on Redis.
    Etcd,
    /// `ObjectStoreLock` (an object per lock, granted by conditional writes, expiry seen on
    /// each worker's own clock) on S3 (a throwaway SeaweedFS); the counter and the fenced
    /// resource stay on Redis.
    S3,
    /// `MysqlLock` (a lease table, waiters poll) on MariaDB / MySQL; the counter and the
    /// fenced resource stay on Redis.
    Mysql,
}

impl Backend {
    /// The name on the command line: `redis`, `postgres`, `etcd`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Redis => "redis",
            Self::Postgres => "postgres",
            Self::Etcd => "etcd",
            Self::S3 => "s3",
            Self::Mysql => "mysql",
        }
    }

    /// The lease TTL when --ttl-ms is not given, in milliseconds: 500, or 2,000 on etcd, which
    /// counts leases in whole seconds and raises them to its minimum (2 s with its default
    /// timing): a shorter lease would end on the client long before the server lets go.
    pub(crate) fn default_ttl_ms(self) -> u64 {
        match self {
            Self::Redis | Self::Postgres | Self::Mysql => 500,
            Self::Etcd => 2_000,
            // A takeover after a stall waits a whole lease seen unchanged: short, to keep it.
            Self::S3 => 1_000,
        }
    }
}

/// The options of a demo run.
#[derive(Debug, Clone, Args)]
pub(crate) struct RunArgs {
    /// Where the lock lives. With `postgres` the demo also starts a throwaway PostgreSQL (unless
    /// given --postgres-url) and the workers take `PostgresLock`; with `etcd`, a throwaway
    /// one-member etcd (unless given --etcd-url) and `EtcdLock`. The counter and the fenced
    /// resource, the store the lock protects, stay on Redis either way.
    #[arg(long, value_enum, default_value_t = Backend::Redis)]
    pub(crate) backend: Backend,

    /// How many worker processes contend for the lock (at least 2, so one can take over from
    /// a stalled one).
    #[arg(long, default_value_t = 4, value_parser = value_parser!(u32).range(2..=64))]
    pub(crate) workers: u32,

    /// How long the workers run, in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 8, value_parser = value_parser!(u64).range(1..=3600))]
    pub(crate) duration: u64,

    /// The lease TTL of every acquisition, in milliseconds [default: 500; 2000 with
    /// --backend etcd, where it must be whole seconds, at least 2].
    #[arg(long, value_name = "MS", value_parser = value_parser!(u64).range(1..=60_000))]
    pub(crate) ttl_ms: Option<u64>,

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
    /// keys of the lock demo:ledger: its fencing counter, its holder's description and its fair
    /// queue).
    #[arg(long, value_name = "URL", visible_alias = "url", env = "REDIS_URL")]
    pub(crate) redis_url: Option<String>,

    /// With --backend postgres: use this PostgreSQL (>= 12) instead of starting a throwaway one.
    /// The demo creates the lease table distlock_leases if it is missing and takes only the
    /// lock demo:ledger (one row).
    #[arg(long, value_name = "URL")]
    pub(crate) postgres_url: Option<String>,

    /// With --backend etcd: use this etcd cluster instead of starting a throwaway one: every
    /// member's client URL, comma separated (`http://10.0.0.1:2379,http://10.0.0.2:2379`). The
    /// demo takes only the lock demo:ledger (the key distlock/demo:ledger).
    #[arg(long, value_name = "URLS")]
    pub(crate) etcd_url: Option<String>,

    /// With --backend mysql: use this MariaDB / MySQL instead of starting a throwaway one
    /// (`mysql://user:pw@host:port/db`). The demo creates the lease table distlock_leases if it
    /// is missing and takes only the lock demo:ledger (one row).
    #[arg(long, value_name = "URL")]
    pub(crate) mysql_url: Option<String>,
}

/// The parameters of one worker process, passed on its command line by the parent.
#[derive(Debug, Clone, Args)]
pub(crate) struct WorkerArgs {
    /// The worker's number, from 0.
    #[arg(long)]
    pub(crate) index: u32,

    /// Where the lock lives.
    #[arg(long, value_enum)]
    pub(crate) backend: Backend,

    /// The Redis server (the counter and the resource; the lock too with `--backend redis`).
    #[arg(long)]
    pub(crate) redis_url: String,

    /// The PostgreSQL server of the lock, with `--backend postgres`.
    #[arg(long, required_if_eq("backend", "postgres"))]
    pub(crate) postgres_url: Option<String>,

    /// The etcd members of the lock (client URLs, comma separated), with `--backend etcd`.
    #[arg(long, required_if_eq("backend", "etcd"))]
    pub(crate) etcd_url: Option<String>,

    /// The S3 endpoint of the lock (SeaweedFS's), with `--backend s3`.
    #[arg(long, required_if_eq("backend", "s3"))]
    pub(crate) s3_endpoint: Option<String>,
    /// The MariaDB / MySQL server of the lock, with `--backend mysql`.
    #[arg(long, required_if_eq("backend", "mysql"))]
    pub(crate) mysql_url: Option<String>,

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
        push("backend", self.backend.as_str().to_owned());
        push("redis-url", self.redis_url.clone());
        if let Some(url) = &self.postgres_url {
            push("postgres-url", url.clone());
        }
        if let Some(urls) = &self.etcd_url {
            push("etcd-url", urls.clone());
        }
        if let Some(endpoint) = &self.s3_endpoint {
            push("s3-endpoint", endpoint.clone());
        }
        if let Some(url) = &self.mysql_url {
            push("mysql-url", url.clone());
        }
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
    /// The lease TTL in milliseconds: --ttl-ms, or the backend's default.
    pub(crate) fn ttl_ms(&self) -> u64 {
        self.ttl_ms.unwrap_or_else(|| self.backend.default_ttl_ms())
    }

    /// The combinations of options clap cannot rule out by itself: the fair lock (`--fair`,
    /// `--compare`) needs Redis, `--postgres-url` needs `--backend postgres`, `--etcd-url`
    /// needs `--backend etcd`, and a TTL on etcd is whole seconds, at least 2.
    ///
    /// # Errors
    /// A message for the user, naming the options that do not go together.
    pub(crate) fn check(&self) -> Result<(), String> {
        if self.backend == Backend::Etcd && (self.fair || self.compare) {
            let option = if self.fair { "--fair" } else { "--compare" };
            return Err(format!(
                "{option} takes the fair lock (locker.fair), which EtcdLock does not offer yet \
                 (it answers LockError::Unsupported). Drop {option} to run the plain lock on \
                 etcd, or use --backend redis."
            ));
        }
        if self.backend == Backend::S3 && (self.fair || self.compare) {
            let option = if self.fair { "--fair" } else { "--compare" };
            return Err(format!(
                "{option} takes the fair lock (locker.fair), which ObjectStoreLock does not                  offer (it answers LockError::Unsupported). Drop {option} to run the plain lock                  on S3, or use --backend redis."
            ));
        }
        if self.backend != Backend::Etcd && self.etcd_url.is_some() {
            return Err("--etcd-url is for the lock on etcd: add --backend etcd".into());
        }
        if self.backend == Backend::Etcd {
            let ttl = self.ttl_ms();
            if !ttl.is_multiple_of(1_000) || ttl < 2_000 {
                return Err(format!(
                    "--ttl-ms {ttl} on etcd: etcd counts leases in whole seconds and raises them \
                     to at least 2 s, so the key would outlive the lease the workers count with; \
                     give a multiple of 1000, at least 2000"
                ));
            }
        }
        if self.backend == Backend::Postgres && (self.fair || self.compare) {
            let option = if self.fair { "--fair" } else { "--compare" };
            return Err(format!(
                "{option} takes the fair lock (locker.fair), which needs Redis: it is a queue \
                 kept in Redis, and PostgresLock answers LockError::Unsupported for it. Drop \
                 {option} to run the plain lock on PostgreSQL, or use --backend redis."
            ));
        }
        if self.backend == Backend::Mysql && (self.fair || self.compare) {
            return Err(
                "--fair and --compare take the fair lock as the demo runs it, with Redis; drop \
                 them to run the plain lock on MariaDB, or use --backend redis"
                    .into(),
            );
        }
        if self.backend != Backend::Mysql && self.mysql_url.is_some() {
            return Err(
                "--mysql-url is for the lock on MariaDB / MySQL: add --backend mysql".into(),
            );
        }
        if self.backend != Backend::Postgres && self.postgres_url.is_some() {
            return Err(
                "--postgres-url is for the lock on PostgreSQL: add --backend postgres".into(),
            );
        }
        Ok(())
    }

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
        for (fair, backend, postgres_url, etcd_url) in [
            (false, Backend::Redis, None, None),
            (true, Backend::Redis, None, None),
            (
                false,
                Backend::Postgres,
                Some("postgres://postgres@127.0.0.1:7001/postgres".to_owned()),
                None,
            ),
            (
                false,
                Backend::Etcd,
                None,
                Some("http://127.0.0.1:7002,http://127.0.0.1:7003".to_owned()),
            ),
            (false, Backend::S3, None, None),
        ] {
            let args = WorkerArgs {
                index: 3,
                backend,
                redis_url: "redis://127.0.0.1:7000/".to_owned(),
                postgres_url,
                etcd_url,
                s3_endpoint: (backend == Backend::S3).then(|| "http://127.0.0.1:7004".to_owned()),
                mysql_url: None,
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
            assert_eq!((back.fair, back.backend), (fair, backend));
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
            (cli.run.workers, cli.run.duration, cli.run.ttl_ms()),
            (4, 8, 500)
        );
        assert_eq!((cli.run.hold_ms, cli.run.pause_every), (2, 25));
        assert!(cli.run.redis_url.is_none());
        assert!(!cli.run.fair && !cli.run.compare);
        assert_eq!(cli.run.backend, Backend::Redis);
        assert!(cli.run.postgres_url.is_none());
        assert_eq!(cli.run.check(), Ok(()));
    }

    #[test]
    fn backends() {
        let check = |argv: &[&str]| Cli::try_parse_from(argv).map(|cli| cli.run.check());
        assert_eq!(
            check(&["demo", "--backend", "redis"]).expect("parses"),
            Ok(())
        );
        assert_eq!(
            check(&["demo", "--backend", "postgres"]).expect("parses"),
            Ok(())
        );
        assert_eq!(
            check(&["demo", "--backend", "mysql"]).expect("parses"),
            Ok(())
        );
        assert!(
            check(&["demo", "--backend", "mysql", "--fair"])
                .expect("parses")
                .is_err()
        );
        assert!(
            check(&["demo", "--mysql-url", "mysql://u:p@127.0.0.1/db"])
                .expect("parses")
                .is_err()
        );
        assert!(check(&["demo", "--backend", "mongodb"]).is_err());
        let url = "postgres://postgres@127.0.0.1:5999/postgres";
        assert_eq!(
            check(&["demo", "--backend", "postgres", "--postgres-url", url]).expect("parses"),
            Ok(())
        );
        // The fair lock is a queue in Redis: PostgresLock does not take it.
        for fair in ["--fair", "--compare"] {
            let refused = check(&["demo", "--backend", "postgres", fair]).expect("parses");
            assert!(refused.is_err_and(|e| e.contains("needs Redis")), "{fair}");
        }
        assert!(
            check(&["demo", "--postgres-url", url])
                .expect("parses")
                .is_err()
        );
        // etcd: no fair lock, whole-second TTLs of at least 2 s (2 s by default).
        let etcd = Cli::try_parse_from(["demo", "--backend", "etcd"]).expect("parses");
        assert_eq!((etcd.run.check(), etcd.run.ttl_ms()), (Ok(()), 2_000));
        for refused in [
            &["demo", "--backend", "etcd", "--fair"][..],
            &["demo", "--backend", "etcd", "--ttl-ms", "500"],
            &["demo", "--backend", "etcd", "--ttl-ms", "2500"],
            &["demo", "--etcd-url", "http://127.0.0.1:2379"],
        ] {
            let checked = Cli::try_parse_from(refused).expect("parses").run.check();
            assert!(checked.is_err(), "{refused:?}");
        }
        assert_eq!(
            check(&["demo", "--backend", "etcd", "--ttl-ms", "3000"]).expect("parses"),
            Ok(())
        );
        // A worker on PostgreSQL must be told where it is.
        let worker = ["demo", "worker", "--index", "0", "--backend", "postgres"];
        let rest = [
            "--redis-url",
            "redis://127.0.0.1:7000/",
            "--deadline-unix-ms",
            "1",
            "--ttl-ms",
            "500",
            "--hold-ms",
            "2",
            "--pause-every",
            "0",
            "--wait-ms",
            "10",
        ];
        assert!(Cli::try_parse_from(worker.iter().chain(&rest)).is_err());
    }
}
