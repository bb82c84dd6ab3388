//! The command line: global connection options and one struct per subcommand.

#[cfg(feature = "tls")]
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::exit;

/// Inspect, release and use distlock locks on Redis and Valkey (single, Cluster, Sentinel),
/// Redlock, PostgreSQL, MySQL / MariaDB, etcd and object storage (S3).
#[derive(Debug, Parser)]
#[command(name = "distlock", version, about, after_help = exit::CODES_HELP)]
pub(crate) struct Cli {
    #[command(flatten)]
    pub(crate) target: TargetArgs,
    #[command(flatten)]
    pub(crate) verbosity: Verbosity,
    /// Print JSON (one document; `watch`: one line per refresh) instead of tables.
    #[arg(long, global = true)]
    pub(crate) json: bool,
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// What the library's warnings print on stderr.
#[derive(Debug, Args)]
pub(crate) struct Verbosity {
    /// Print no warnings (eviction risk, a grace period after a store restart, renewal at
    /// risk, a lost lease); errors still print.
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    pub(crate) quiet: bool,
    /// More of what the library says: -v info, -vv debug, -vvv trace. `RUST_LOG` (tracing's
    /// filter syntax, e.g. `lock_redis=debug`) overrides both.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub(crate) verbose: u8,
}

/// Where the locks live.
#[derive(Debug, Clone, Args)]
pub(crate) struct TargetArgs {
    /// Where the locks live; the scheme picks the backend. Redis or Valkey:
    /// `redis://[user:password@]host:port/db` (also `rediss://`, `valkey://`, `valkeys://`,
    /// `redis+unix://`, `unix://`); a Redis Cluster is recognised by itself; give several
    /// nodes' URLs, comma separated, if one may be down. Redlock: one Redis URL per master,
    /// with `--redlock`. etcd: `etcd://host:port` or `http(s)://host:port`, one per member.
    /// PostgreSQL: `postgres://user@host:port/db` (or `postgresql://`). MySQL / MariaDB:
    /// `mysql://user:password@host:port/db` (or `mariadb://`; lock-mysql's lease table).
    /// Object storage: `s3://bucket/prefix` (the endpoint and credentials from the AWS
    /// environment variables: `AWS_ENDPOINT_URL`, `AWS_ACCESS_KEY_ID`, ...).
    #[arg(
        long,
        env = "DISTLOCK_URL",
        value_delimiter = ',',
        default_value = "redis://127.0.0.1:6379/",
        global = true,
        hide_env_values = true
    )]
    pub(crate) url: Vec<String>,
    /// The URLs are Redlock's independent masters (`Redlock::builder().urls(..)`), one per
    /// master: a lock is held when a quorum holds it; `show` gives each master's answer.
    #[arg(long, env = "DISTLOCK_REDLOCK", global = true)]
    pub(crate) redlock: bool,
    /// The key prefix the applications' lockers use (`RedisLockBuilder::prefix`,
    /// `EtcdLockBuilder::prefix`); names are shown without it. Default: none on Redis,
    /// `distlock/` on etcd (each library's default).
    #[arg(long, env = "DISTLOCK_PREFIX", global = true)]
    pub(crate) prefix: Option<String>,
    /// How long connecting may take.
    #[arg(long, default_value = "2s", value_parser = duration, global = true)]
    pub(crate) connect_timeout: Duration,
    /// How long one command may wait for its reply.
    #[arg(long, default_value = "2s", value_parser = duration, global = true)]
    pub(crate) command_timeout: Duration,
    /// Sentinel: the master's name; the URLs are then the sentinels', and the master they name
    /// is used (without credentials, as `RedisLockBuilder::sentinel` connects to it).
    #[cfg(feature = "sentinel")]
    #[arg(
        long,
        env = "DISTLOCK_SENTINEL_MASTER",
        value_name = "NAME",
        global = true
    )]
    pub(crate) sentinel_master: Option<String>,
    /// TLS (`rediss://`): trust only this CA certificate (PEM file) instead of the system's
    /// trust store.
    #[cfg(feature = "tls")]
    #[arg(long, value_name = "FILE", global = true)]
    pub(crate) tls_ca: Option<PathBuf>,
    /// TLS: present this client certificate (PEM file; with --tls-key): mutual TLS.
    #[cfg(feature = "tls")]
    #[arg(long, value_name = "FILE", global = true, requires = "tls_key")]
    pub(crate) tls_cert: Option<PathBuf>,
    /// TLS: the private key (PEM file) of --tls-cert.
    #[cfg(feature = "tls")]
    #[arg(long, value_name = "FILE", global = true, requires = "tls_cert")]
    pub(crate) tls_key: Option<PathBuf>,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// List held locks: name, kind, holder token, remaining TTL, last fencing token, waiters.
    ///
    /// Walks the keyspace of every master with SCAN (never KEYS), `--count` keys per step. A
    /// lock's own keys (`{name}:distlock-fence`, `-released`, `-holder`, ...) are folded into
    /// its row. WAITERS counts the connections subscribed to the lock's release channel (one
    /// per waiting process, whatever its number of waiting tasks), plus queued fair waiters.
    Ls(LsArgs),
    /// Everything about one lock: holder, TTL, last fencing token issued, waiters, holder
    /// metadata, readers, permits and the fair queue when they exist.
    Show(ShowArgs),
    /// Release a lock only if it is still held with TOKEN (printed by `ls`/`show`), and wake
    /// its waiters. Exit 1 when the lock is held with another token or not held.
    Release(ReleaseArgs),
    /// Ask the holder of a lock to give it up, without taking it from under its work: a
    /// `distlock run` holder (or a library holder whose request was revocable) is told at its
    /// next renewal, stops its command and releases. Exit 1 when the lock is not held.
    Revoke(RevokeArgs),
    /// Run a command while holding a lock, like `consul lock`.
    ///
    /// The lease is renewed while the command runs. The command gets DISTLOCK_LOCK_NAME and
    /// DISTLOCK_FENCING_TOKEN in its environment. If the lease is lost, the command gets
    /// SIGTERM, then SIGKILL after --kill-after, and distlock exits with the "lost" code. SIGINT,
    /// SIGTERM and SIGHUP sent to distlock are passed on to the command. The command and what it
    /// starts never outlive distlock: if distlock is killed, a guardian kills the command's
    /// process group. The lock is released when the command exits (what it left running in its
    /// group is killed first), and distlock exits with its code (128 + N when a signal N ended
    /// it).
    ///
    /// With --leader, the lock is a leader election: distlock campaigns (waits to be elected,
    /// without limit), runs the command while it leads (DISTLOCK_TERM is the term), and when the
    /// leadership is lost stops the command (SIGTERM to its process group, SIGKILL after
    /// --kill-after) and campaigns again. The command exiting by itself ends distlock with its code,
    /// after resigning. --once: one campaign (bounded by --wait if given), one run.
    #[command(after_help = exit::CODES_HELP)]
    Run(RunArgs),
    /// The current leader of the election NAME (`run --leader`, `locker.elect(NAME)`): its
    /// term, value and since when it leads. "no leader" when nobody leads.
    Leader(LeaderArgs),
    /// A live table of held locks, refreshed every --interval, with announced releases per
    /// second per name. Ctrl-C ends it.
    ///
    /// RELEASES/S counts the releases announced on each name's channel between refreshes: the
    /// lock passing between processes under contention (a release nobody else waits for, a
    /// handover inside one process and an expiry are not announced). Fencing tokens are the server's clock in µs, so their differences are time,
    /// not a count. On a cluster, only the names seen held since the watch started are counted
    /// (sharded pub/sub has no patterns).
    Watch(WatchArgs),
    /// Install what fenced writes need, so that any client (redis-cli, psql) can write fenced.
    ///
    /// Redis: loads the `distlock` function library (`FCALL distlock_fenced_set 1 KEY TOKEN
    /// VALUE [PX ms]`, `FCALL distlock_fenced_del 1 KEY TOKEN`) on the server, or on every
    /// master of a Cluster; a loaded library is replaced only by a newer version. Without
    /// functions (Redis < 7, an ACL without FUNCTION), says so: the library's code then runs as
    /// EVAL scripts. PostgreSQL (a `postgres://` or `postgresql://` URL): creates or upgrades
    /// lock-postgres's schema (the lease table and its functions). MySQL / MariaDB (a
    /// `mysql://` or `mariadb://` URL): creates lock-mysql's schema (the lease table).
    Migrate,
    /// A web console, a JSON API and a Prometheus exporter of the locks the store holds.
    ///
    /// `/` is a live page (every held lock with its holder, hold age, TTL, fencing token and
    /// waiters; the elections with their leader), `/api/locks` and `/api/elections` the same
    /// as JSON, `/metrics` counts per kind and name prefix in Prometheus's text format. One
    /// sweep of the store (as `ls`) serves them all, at most once per --refresh. Listens on the
    /// loopback by default; another address needs --auth-token-file. Ctrl-C or SIGTERM stops it.
    Serve(ServeArgs),
}

/// `distlock serve`.
#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// The address to listen on. A non-loopback address requires --auth-token-file.
    #[arg(long, default_value = "127.0.0.1:9464")]
    pub(crate) listen: std::net::SocketAddr,
    /// How old the store's snapshot may be (100ms to 1h): concurrent requests share one sweep,
    /// and a request within --refresh of the last sweep is served from it.
    #[arg(long, default_value = "1s", value_parser = interval)]
    pub(crate) refresh: Duration,
    /// A lock held longer than this is marked stuck (on the page, and `stuck` in the API).
    #[arg(long, default_value = "5m", value_parser = duration)]
    pub(crate) stuck_after: Duration,
    /// How far back the console's timeline goes: the holds the sweeps saw and the waiting
    /// lines' lengths, kept in memory (at most 10,000 holds and 500 lines of 1,000 changes:
    /// about 10 MB at the very most). The server sweeps the store every --refresh for it,
    /// whether a page is open or not.
    #[arg(long, default_value = "15m", value_parser = duration)]
    pub(crate) history: Duration,
    /// Let the page and `POST /api/release` release a lock, with its holder's token typed in
    /// (as `release --token`).
    #[arg(long)]
    pub(crate) allow_release: bool,
    /// A file holding the bearer token that `/api/*` and `/metrics` then require
    /// (`Authorization: Bearer TOKEN`); required for a non-loopback --listen. Only an
    /// authenticated request sees holders' tokens unmasked.
    #[arg(long, value_name = "FILE")]
    pub(crate) auth_token_file: Option<std::path::PathBuf>,
    /// Only names matching this glob, without the prefix.
    #[arg(long, default_value = "*")]
    pub(crate) pattern: String,
    #[command(flatten)]
    pub(crate) scan: ScanArgs,
}

/// `distlock ls`.
#[derive(Debug, Args)]
pub(crate) struct LsArgs {
    /// Only names matching this glob (`*`, `?`, `[abc]`), without the prefix.
    #[arg(default_value = "*")]
    pub(crate) pattern: String,
    #[command(flatten)]
    pub(crate) scan: ScanArgs,
}

/// How the keyspace is walked.
#[derive(Debug, Args, Clone)]
pub(crate) struct ScanArgs {
    /// Keys per SCAN step (SCAN's COUNT hint): larger takes fewer round trips, each longer.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub(crate) count: u32,
    /// Also list string keys with a TTL whose value is not a distlock token: locks taken by
    /// redis-py, node-redlock or redsync under the same names (and any other such key).
    #[arg(long)]
    pub(crate) foreign: bool,
}

/// `distlock show`.
#[derive(Debug, Args)]
pub(crate) struct ShowArgs {
    /// The lock name, without the prefix.
    pub(crate) name: String,
}

/// `distlock release`.
#[derive(Debug, Args)]
pub(crate) struct ReleaseArgs {
    /// The lock name, without the prefix.
    pub(crate) name: String,
    /// The holder's token, exactly as `show` prints it (`dl:` + 32 hex characters).
    #[arg(long, required_unless_present = "force", conflicts_with = "force")]
    pub(crate) token: Option<String>,
    /// Release whoever holds it now: reads the token, asks for confirmation on the terminal,
    /// then releases only if that token still holds. Refused when stdin is not a terminal.
    #[arg(long)]
    pub(crate) force: bool,
}

/// `distlock revoke`.
#[derive(Debug, Args)]
pub(crate) struct RevokeArgs {
    /// The lock name, without the prefix.
    pub(crate) name: String,
    /// Why: shown to the holder (`distlock run` prints it).
    #[arg(long)]
    pub(crate) note: Option<String>,
}

/// `distlock run`.
#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    /// The lock name, without the prefix.
    pub(crate) name: String,
    /// The lease: renewed every third of it while the command runs; how long the lock
    /// outlives a crash of distlock itself.
    #[arg(long, default_value = "30s", value_parser = duration)]
    pub(crate) lease: Duration,
    /// The old spelling of --lease: refused with a hint.
    #[arg(long = "ttl", hide = true, value_parser = renamed("--lease"))]
    pub(crate) old_ttl: Option<String>,
    /// How long to wait for the lock; `0s` tries once. Past it, exit with the "busy" code.
    /// Default 10s; with --leader, no limit (a candidate waits to be elected), and only with
    /// --once.
    #[arg(long, value_parser = duration)]
    pub(crate) wait: Option<Duration>,
    /// After SIGTERM on a lost lease, how long the command has before SIGKILL.
    #[arg(long, default_value = "5s", value_parser = duration)]
    pub(crate) kill_after: Duration,
    /// The old spelling of --kill-after (it clashed with the store grace period): refused with
    /// a hint.
    #[arg(long = "grace", hide = true, value_parser = renamed("--kill-after"))]
    pub(crate) old_grace: Option<String>,
    /// Leader election: campaign, run the command while leading, stop it when the leadership
    /// is lost, campaign again.
    #[arg(long)]
    pub(crate) leader: bool,
    /// With --leader: one campaign and one run, as `run` without --leader (a lost leadership
    /// exits with the "lost" code).
    #[arg(long, requires = "leader")]
    pub(crate) once: bool,
    /// With --leader: what observers see of this candidate while it leads (`distlock leader`,
    /// `Election::observe`). Default `HOST:PID`.
    #[arg(long, requires = "leader")]
    pub(crate) value: Option<String>,
    /// What `ls`, `show` and the console show beside the holder's host and pid (default: the
    /// command). Written with the grant.
    #[arg(long, conflicts_with = "leader")]
    pub(crate) note: Option<String>,
    /// Lock-delay: if distlock itself dies (or hangs, or is cut off from the store) while it
    /// holds the lock, nobody else gets the name until this long after the lease ran out; a
    /// normal end releases it at once. For a command whose writes may still be on their way
    /// when its lease ends. `show` and the console say "delayed until" meanwhile (not for an
    /// election's leader, whose note is its record). With --leader: a failed leader's term
    /// keeps the election without a leader that long.
    #[arg(long, value_parser = duration)]
    pub(crate) lock_delay: Option<Duration>,
    /// Keep the lock when `distlock revoke` asks for it. By default a revocation is honoured as
    /// a lost lease is: the command is stopped (SIGTERM, SIGKILL after --kill-after), then the
    /// lock released, and distlock exits with the "lost" code.
    #[arg(long)]
    pub(crate) ignore_revocation: bool,
    /// The command and its arguments (after `--`).
    #[arg(required = true, num_args = 1.., trailing_var_arg = true, allow_hyphen_values = true)]
    pub(crate) command: Vec<String>,
}

impl RunArgs {
    /// The wait for the lock: --wait, 10 s by default; `None` (no limit) for a candidate.
    pub(crate) fn wait_limit(&self) -> Option<Duration> {
        match (self.leader, self.wait) {
            (_, Some(wait)) => Some(wait),
            (true, None) => None,
            (false, None) => Some(Duration::from_secs(10)),
        }
    }
}

/// `distlock leader`.
#[derive(Debug, Args)]
pub(crate) struct LeaderArgs {
    /// The election's name (its lock's name), without the prefix.
    pub(crate) name: String,
}

/// `distlock watch`.
#[derive(Debug, Args)]
pub(crate) struct WatchArgs {
    /// Only names matching this glob, without the prefix.
    #[arg(default_value = "*")]
    pub(crate) pattern: String,
    /// Time between refreshes (100ms to 1h).
    #[arg(long, default_value = "1s", value_parser = interval)]
    pub(crate) interval: Duration,
    /// Stop after this many refreshes (default: until Ctrl-C).
    #[arg(long)]
    pub(crate) iterations: Option<u64>,
    #[command(flatten)]
    pub(crate) scan: ScanArgs,
}

/// A duration in humantime's notation: `30s`, `1m 30s`, `500ms`.
fn duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text).map_err(|e| format!("{e} (examples: 30s, 1m 30s, 500ms)"))
}

/// A refresh interval: at least 100 ms so a watch never floods the server, at most an hour.
fn interval(text: &str) -> Result<Duration, String> {
    let d = duration(text)?;
    if (Duration::from_millis(100)..=Duration::from_secs(3600)).contains(&d) {
        Ok(d)
    } else {
        Err("the interval must be between 100ms and 1h".into())
    }
}

/// The parser of a flag that was renamed before the first release: it refuses every value,
/// naming the new flag, so a script written for the old name fails before anything runs (no
/// lock taken, nothing released) rather than running with a default.
fn renamed(now: &'static str) -> impl Fn(&str) -> Result<String, String> + Clone {
    move |_| Err(format!("renamed: use {now} (nothing was run)"))
}
