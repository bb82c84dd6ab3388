//! The parent process: sets up Redis (and PostgreSQL or etcd with `--backend postgres` or
//! `--backend etcd`), runs the
//! workers, and reports.

use std::borrow::Cow;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use distlock::redis::redis::{self, aio::MultiplexedConnection};
use lock_testkit::{
    EtcdCluster, EtcdNetwork, MariadbServer, PostgresServer, RedisServer, SeaweedfsServer,
};

use crate::Error;
use crate::backends::{POSTGRES_POOL_SIZE, migrate_mysql, migrate_postgres};
use crate::cli::{Backend, RunArgs, WorkerArgs};
use crate::progress::Progress;
use crate::protocol::unix_ms_now;
use crate::report::{self, EndState, Spread};
use crate::resource::{COUNTER_KEY, DEMO_KEYS, FencedResource, INSIDE_KEY, LOCK_NAME};
use crate::supervisor::Fleet;

/// How long after the deadline a worker may still run before it is killed.
const GRACE: Duration = Duration::from_secs(10);

/// The exit code when a check failed or a worker failed.
const EXIT_FAILED: u8 = 1;

/// The exit code when the demo could not run (no Redis or PostgreSQL, no processes).
const EXIT_UNABLE: u8 = 2;

/// The exit code after Ctrl-C (128 + SIGINT, as shells report it).
const EXIT_INTERRUPTED: u8 = 130;

/// Runs the demo; the process's exit code.
pub(crate) fn main(args: &RunArgs) -> ExitCode {
    match run(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("demo: {e}");
            ExitCode::from(EXIT_UNABLE)
        }
    }
}

/// Sets up, runs the workers until they are done (once per lock with `--compare`), reports,
/// and tears down.
fn run(args: &RunArgs) -> Result<ExitCode, Error> {
    // One thread for the Ctrl-C watcher; Redis calls run on it through `block_on`.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let interrupted = watch_ctrl_c(&runtime);

    // Dropped at the end of this function (also on an early return), which kills it by PID.
    let server = match args.redis_url {
        Some(_) => None,
        None => Some(RedisServer::start().map_err(|e| {
            format!(
                "cannot start a throwaway redis-server: {e}\n\
                 Install redis-server (>= 7.0) with `bash scripts/ensure-redis.sh`, or point \
                 DISTLOCK_REDIS_SERVER at one, or use a running server with --redis-url."
            )
        })?),
    };
    let url = match (&server, &args.redis_url) {
        (Some(server), _) => server.url(),
        (None, Some(url)) => url.clone(),
        (None, None) => return Err("no Redis server".into()),
    };
    // With --backend postgres: the lock's server, also stopped by PID when dropped.
    let pg_server = match (args.backend, &args.postgres_url) {
        (Backend::Postgres, None) => Some(start_postgres(args.workers)?),
        _ => None,
    };
    let pg_url = match (&pg_server, &args.postgres_url) {
        (Some(server), _) => Some(server.url()),
        (None, url) => url.clone(),
    };
    if let Some(pg_url) = &pg_url {
        runtime.block_on(migrate_postgres(pg_url))?;
    }
    // With --backend etcd: a one-member etcd, also stopped by PID when dropped.
    let etcd_server = match (args.backend, &args.etcd_url) {
        (Backend::Etcd, None) => Some(start_etcd()?),
        _ => None,
    };
    let etcd_url = match (&etcd_server, &args.etcd_url) {
        (Some(server), _) => Some(server.endpoints().join(",")),
        (None, url) => url.clone(),
    };
    // With --backend s3: a throwaway SeaweedFS, also stopped by PID when dropped.
    let s3_server = match args.backend {
        Backend::S3 => Some(start_seaweedfs()?),
        _ => None,
    };
    let s3_endpoint = s3_server.as_ref().map(SeaweedfsServer::endpoint);
    // With --backend mysql: a throwaway MariaDB, also stopped by PID when dropped.
    let my_server = match (args.backend, &args.mysql_url) {
        (Backend::Mysql, None) => Some(start_mariadb()?),
        _ => None,
    };
    let my_url = match (&my_server, &args.mysql_url) {
        (Some(server), _) => Some(server.url()),
        (None, url) => url.clone(),
    };
    if let Some(my_url) = &my_url {
        runtime.block_on(migrate_mysql(my_url))?;
    }
    let backend = match (&pg_url, &etcd_url) {
        _ if s3_server.is_some() => LockServer::S3 {
            server: s3_server.as_ref(),
        },
        _ if my_url.is_some() => LockServer::Mysql {
            url: my_url.as_deref().unwrap_or_default(),
            pid: my_server.as_ref().and_then(MariadbServer::pid),
        },
        (Some(pg_url), _) => LockServer::Postgres {
            url: pg_url,
            server: pg_server.as_ref(),
        },
        (None, Some(etcd_url)) => LockServer::Etcd {
            urls: etcd_url,
            server: etcd_server.as_ref(),
        },
        (None, None) => LockServer::Redis,
    };
    let lock_urls = LockUrls {
        postgres: pg_url.as_deref(),
        etcd: etcd_url.as_deref(),
        s3: s3_endpoint.as_deref(),
        mysql: my_url.as_deref(),
    };

    let mut passed = true;
    let mut spreads = Vec::new();
    for (n, fair) in args.modes().into_iter().enumerate() {
        if n > 0 {
            println!();
        }
        print_header(args, fair, &url, server.as_ref(), &backend);
        let Some(outcome) = run_once(args, fair, &url, &lock_urls, &runtime, &interrupted)? else {
            return Ok(ExitCode::from(EXIT_INTERRUPTED));
        };
        passed &= outcome.passed;
        spreads.push((fair, outcome.spread));
        if interrupted.load(Ordering::Relaxed) {
            break;
        }
    }
    if spreads.len() > 1 {
        println!();
        println!("The same run with each lock: grants and waits per worker");
        println!("{}", report::spreads_table(&spreads));
    }

    if let Some(server) = s3_server {
        let pid = server.pid();
        drop(server);
        if let Some(pid) = pid {
            println!("stopped the throwaway SeaweedFS (pid {pid})");
        }
    }
    if let Some(server) = etcd_server {
        let pid = server.members().first().and_then(|m| m.pid());
        drop(server);
        if let Some(pid) = pid {
            println!("stopped the throwaway etcd (pid {pid})");
        }
    }
    if let Some(server) = pg_server {
        let pid = server.pid();
        drop(server);
        if let Some(pid) = pid {
            println!("stopped the throwaway PostgreSQL (pid {pid})");
        }
    }
    if let Some(server) = server {
        let pid = server.pid();
        drop(server);
        if let Some(pid) = pid {
            println!("stopped the throwaway redis-server (pid {pid})");
        }
    }
    Ok(ExitCode::from(if interrupted.load(Ordering::Relaxed) {
        EXIT_INTERRUPTED
    } else if passed {
        0
    } else {
        EXIT_FAILED
    }))
}

/// What one run of the workers ended with.
struct Outcome {
    /// Whether every check passed.
    passed: bool,
    /// Grants and waits per worker.
    spread: Spread,
}

/// Where the lock lives, for the header.
enum LockServer<'a> {
    /// On the Redis server of the counter and the resource.
    Redis,
    /// On PostgreSQL.
    Postgres {
        /// Its URL.
        url: &'a str,
        /// The throwaway server, if the demo started it.
        server: Option<&'a PostgresServer>,
    },
    /// On etcd.
    Etcd {
        /// Its members' client URLs, comma separated.
        urls: &'a str,
        /// The throwaway one-member cluster, if the demo started it.
        server: Option<&'a EtcdCluster>,
    },
    /// On S3.
    S3 {
        /// The throwaway SeaweedFS.
        server: Option<&'a SeaweedfsServer>,
    },
    /// On MariaDB / MySQL.
    Mysql {
        /// Its URL.
        url: &'a str,
        /// The PID of the throwaway server, if the demo started it.
        pid: Option<u32>,
    },
}

/// Where the workers find the lock when it is not on Redis.
struct LockUrls<'a> {
    /// PostgreSQL's URL, with `--backend postgres`.
    postgres: Option<&'a str>,
    /// The etcd members' client URLs, comma separated, with `--backend etcd`.
    etcd: Option<&'a str>,
    /// The S3 endpoint, with `--backend s3`.
    s3: Option<&'a str>,
    /// MariaDB's URL, with `--backend mysql`.
    mysql: Option<&'a str>,
}

/// Starts a throwaway SeaweedFS (`scripts/ensure-seaweedfs.sh` installs it) on loopback ports.
fn start_seaweedfs() -> Result<SeaweedfsServer, Error> {
    SeaweedfsServer::start().map_err(|e| {
        format!(
            "cannot start a throwaway SeaweedFS: {e}\n\
             Install it with `bash scripts/ensure-seaweedfs.sh`, or point DISTLOCK_WEED at a \
             weed binary."
        )
        .into()
    })
}

/// Starts a throwaway MariaDB (`scripts/ensure-mariadb.sh` installs it) on a loopback port.
fn start_mariadb() -> Result<MariadbServer, Error> {
    MariadbServer::start().map_err(|e| {
        format!(
            "cannot start a throwaway MariaDB: {e}\n\
             Install it with `bash scripts/ensure-mariadb.sh`, or use a running server with \
             --mysql-url."
        )
        .into()
    })
}

/// Starts a throwaway one-member etcd (`scripts/ensure-etcd.sh` installs etcd) on a loopback
/// port: the demo never partitions it, so it needs no privilege and makes no network namespace.
fn start_etcd() -> Result<EtcdCluster, Error> {
    EtcdCluster::builder()
        .network(EtcdNetwork::Loopback)
        .start()
        .map_err(|e| {
            format!(
                "cannot start a throwaway etcd: {e}\n\
             Install etcd with `bash scripts/ensure-etcd.sh`, or point DISTLOCK_ETCD at an etcd \
             binary, or use a running cluster with --etcd-url."
            )
            .into()
        })
}

/// Starts a throwaway PostgreSQL with room for every worker's connections.
fn start_postgres(workers: u32) -> Result<PostgresServer, Error> {
    // Per worker: its pool and the connection that listens for releases; then the parent's and
    // some slack. Never below PostgreSQL's default of 100.
    let connections = (usize::try_from(workers)? * (POSTGRES_POOL_SIZE + 1) + 10).max(100);
    PostgresServer::builder()
        .setting("max_connections", connections.to_string())
        .start()
        .map_err(|e| {
            format!(
                "cannot start a throwaway PostgreSQL: {e}\n\
                 Install PostgreSQL (>= 12) with `bash scripts/ensure-postgres.sh`, or point \
                 DISTLOCK_PG_BINDIR at the directory holding initdb and postgres, or use a \
                 running server with --postgres-url."
            )
            .into()
        })
}

/// Clears the demo's keys, runs the workers (taking the fair lock if `fair`, on PostgreSQL or
/// etcd if `lock_urls` says so) until they are done, and reports. `None` when interrupted
/// before the workers started.
fn run_once(
    args: &RunArgs,
    fair: bool,
    url: &str,
    lock_urls: &LockUrls<'_>,
    runtime: &tokio::runtime::Runtime,
    interrupted: &AtomicBool,
) -> Result<Option<Outcome>, Error> {
    let mut conn = runtime.block_on(prepare(url))?;
    if interrupted.load(Ordering::Relaxed) {
        return Ok(None);
    }

    let started = Instant::now();
    let deadline = started + args.duration();
    let deadline_unix_ms = unix_ms_now() + args.duration * 1_000;
    let workers: Vec<WorkerArgs> = (0..args.workers)
        .map(|index| WorkerArgs {
            index,
            backend: args.backend,
            redis_url: url.to_owned(),
            postgres_url: lock_urls.postgres.map(str::to_owned),
            etcd_url: lock_urls.etcd.map(str::to_owned),
            s3_endpoint: lock_urls.s3.map(str::to_owned),
            mysql_url: lock_urls.mysql.map(str::to_owned),
            deadline_unix_ms,
            ttl_ms: args.ttl_ms(),
            hold_ms: args.hold_ms,
            pause_every: args.pause_every,
            wait_ms: args.wait_ms,
            fair,
        })
        .collect();
    let mut fleet = Fleet::spawn(&workers)?;
    let labels: Vec<String> = fleet
        .slots()
        .iter()
        .map(|s| format!("worker {}", s.index))
        .collect();
    let mut progress = Progress::new(&labels, started, args.duration());
    fleet.supervise(deadline, GRACE, interrupted, &mut progress);
    progress.finish();

    let end = if interrupted.load(Ordering::Relaxed) {
        println!("interrupted: the checks that need the final state of Redis are skipped");
        None
    } else {
        runtime
            .block_on(read_end(&mut conn))
            .inspect_err(|e| eprintln!("demo: cannot read the final state of Redis: {e}"))
            .ok()
    };
    let passed = report::print(fleet.slots(), end.as_ref(), fair, args.backend);
    Ok(Some(Outcome {
        passed,
        spread: Spread::of(fleet.slots()),
    }))
}

/// A flag set when the user presses Ctrl-C. The demo then kills its workers (they got the
/// SIGINT too) and reports what it has, instead of dying and leaving processes behind.
fn watch_ctrl_c(runtime: &tokio::runtime::Runtime) -> Arc<AtomicBool> {
    let interrupted = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&interrupted);
    runtime.spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            flag.store(true, Ordering::Relaxed);
        }
    });
    interrupted
}

/// Prints the servers and the parameters of the run.
fn print_header(
    args: &RunArgs,
    fair: bool,
    url: &str,
    server: Option<&RedisServer>,
    lock_server: &LockServer<'_>,
) {
    let origin = match server.and_then(RedisServer::pid) {
        Some(pid) => format!("a throwaway redis-server, pid {pid}, stopped at the end"),
        None => "given with --redis-url; only the demo's keys are touched".to_owned(),
    };
    let stalls = if args.pause_every == 0 {
        "no stalls".to_owned()
    } else {
        format!(
            "every {}th acquisition of a worker stalls for {} ms",
            args.pause_every,
            args.ttl_ms()
                + u64::try_from(crate::worker::stall_overshoot(args.backend).as_millis())
                    .unwrap_or(u64::MAX)
        )
    };
    println!("distlock demo: worker processes contend for one lock and write to a fenced resource");
    match lock_server {
        LockServer::Redis => {
            println!("  backend   redis: RedisLock, on the Redis of the counter and the resource");
            println!("  redis     {} ({origin})", redacted(url));
        }
        LockServer::Postgres {
            url: pg_url,
            server,
        } => {
            let pg_origin = match server.and_then(PostgresServer::pid) {
                Some(pid) => format!("a throwaway PostgreSQL, pid {pid}, stopped at the end"),
                None => "given with --postgres-url; only the lock demo:ledger is taken".to_owned(),
            };
            println!(
                "  backend   postgres: PostgresLock (lease table distlock_leases) on {} ({pg_origin})",
                redacted(pg_url)
            );
            println!(
                "  redis     {} ({origin}): the counter and the fenced resource, the store the \
                 lock protects",
                redacted(url)
            );
        }
        LockServer::S3 { server } => {
            let pid = server.and_then(SeaweedfsServer::pid).unwrap_or_default();
            println!(
                "  backend   s3: ObjectStoreLock (object {}/{LOCK_NAME}) on a throwaway SeaweedFS, \
                 pid {pid}, stopped at the end",
                crate::backends::S3_URL
            );
            println!(
                "  redis     {} ({origin}): the counter and the fenced resource, the store the \
                 lock protects",
                redacted(url)
            );
        }
        LockServer::Mysql { url: my_url, pid } => {
            let my_origin = match pid {
                Some(pid) => format!("a throwaway MariaDB, pid {pid}, stopped at the end"),
                None => "given with --mysql-url; only the lock demo:ledger is taken".to_owned(),
            };
            println!(
                "  backend   mysql: MysqlLock (lease table distlock_leases) on {} ({my_origin})",
                redacted(my_url)
            );
            println!(
                "  redis     {} ({origin}): the counter and the fenced resource, the store the \
                 lock protects",
                redacted(url)
            );
        }
        LockServer::Etcd { urls, server } => {
            let etcd_origin = match server.and_then(|s| s.members().first()?.pid()) {
                Some(pid) => format!("a throwaway one-member etcd, pid {pid}, stopped at the end"),
                None => "given with --etcd-url; only the lock demo:ledger is taken".to_owned(),
            };
            println!(
                "  backend   etcd: EtcdLock (key distlock/{LOCK_NAME}) on {urls} ({etcd_origin})"
            );
            println!(
                "  redis     {} ({origin}): the counter and the fenced resource, the store the \
                 lock protects",
                redacted(url)
            );
        }
    }
    let (kind, order) = if fair {
        (
            "fair lock",
            "granted in the order the workers asked (locker.fair)",
        )
    } else {
        (
            "lock",
            "granted to whoever asks first once it is free (locker.lock)",
        )
    };
    println!(
        "  {kind:<9} {LOCK_NAME:?}, {order}; lease TTL {} ms, each acquisition waits up to {} ms",
        args.ttl_ms(),
        args.wait_ms
    );
    println!(
        "  workers   {} processes for {} s; the counter's read-modify-write holds {} ms; {stalls}",
        args.workers, args.duration, args.hold_ms
    );
    if args.hold_ms >= args.ttl_ms() {
        println!(
            "  note      --hold-ms >= --ttl-ms: leases run out mid-work, so expect exclusion \
             violations and lost updates"
        );
    }
}

/// Connects and clears the demo's keys (and only those).
async fn prepare(url: &str) -> Result<MultiplexedConnection, Error> {
    let mut conn = redis::Client::open(url)?
        .get_multiplexed_async_connection()
        .await
        .map_err(|e| format!("cannot connect to {}: {e}", redacted(url)))?;
    let _: i64 = redis::cmd("DEL")
        .arg(&DEMO_KEYS)
        .query_async(&mut conn)
        .await?;
    Ok(conn)
}

/// Reads the counter, the inside marker and the resource.
async fn read_end(conn: &mut MultiplexedConnection) -> Result<EndState, Error> {
    let (counter, inside): (Option<u64>, Option<i64>) = redis::cmd("MGET")
        .arg(COUNTER_KEY)
        .arg(INSIDE_KEY)
        .query_async(conn)
        .await?;
    Ok(EndState {
        counter: counter.unwrap_or(0),
        inside: inside.unwrap_or(0),
        resource: FencedResource::snapshot(conn).await?,
    })
}

/// `url` with its password, if any, replaced by `***`.
pub(crate) fn redacted(url: &str) -> Cow<'_, str> {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.into();
    };
    let authority = &rest[..rest.find('/').unwrap_or(rest.len())];
    let Some(at) = authority.rfind('@') else {
        return url.into();
    };
    match authority[..at].split_once(':') {
        Some((user, _)) => format!("{scheme}://{user}:***{}", &rest[at..]).into(),
        None => url.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::redacted;

    #[test]
    fn passwords_are_hidden() {
        assert_eq!(
            redacted("redis://127.0.0.1:6379/"),
            "redis://127.0.0.1:6379/"
        );
        assert_eq!(
            redacted("redis://:s3cret@127.0.0.1:6379/0"),
            "redis://:***@127.0.0.1:6379/0"
        );
        assert_eq!(
            redacted("rediss://app:p@ss@host/"),
            "rediss://app:***@host/"
        );
        assert_eq!(redacted("unix:///tmp/redis.sock"), "unix:///tmp/redis.sock");
    }
}
