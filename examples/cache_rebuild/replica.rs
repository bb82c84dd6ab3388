//! One replica process: serves the cache entry; when it has expired, tries the rebuild lock
//! once (`try_acquire`): the one replica that gets it rebuilds the value and writes it with
//! `distlock_fenced_set` (`RedisFences::set`), the others keep serving their stale copy. It
//! reports each step on stdout, one line each, for the parent:
//!
//! - `stale ID 0 BYTES` — the entry had expired and another replica was rebuilding it: served
//!   the stale copy (BYTES long);
//! - `rebuilding ID TOKEN` — this replica holds the rebuild lock with that fencing token;
//! - `wrote ID TOKEN ok|refused|error` — the rebuilt value's fenced write and its answer.

use std::time::{Duration, Instant};

use clap::Args;
use distlock::redis::RedisLock;
use distlock::{Guard, LockError, Locker};

/// The cached value (an expensive report, say), expiring after `--cache-ttl-ms`.
pub(crate) const CACHE_KEY: &str = "cache-rebuild:report";
/// The lock whose holder rebuilds the entry; its fencing tokens fence [`CACHE_KEY`].
pub(crate) const REBUILD_LOCK: &str = "cache-rebuild:rebuild";
/// How often a replica looks at the entry (a request, in a real service).
const POLL: Duration = Duration::from_millis(50);

/// A replica's options (passed by the parent).
#[derive(Debug, Clone, Args)]
pub(crate) struct ReplicaArgs {
    #[arg(long)]
    pub(crate) redis_url: String,
    #[arg(long)]
    pub(crate) id: usize,
    /// The rebuild lock's lease, in milliseconds (renewed every third of it while held).
    #[arg(long)]
    pub(crate) lease_ms: u64,
    /// How long a rebuild computes, in milliseconds.
    #[arg(long)]
    pub(crate) rebuild_ms: u64,
    /// How long a rebuilt value lives in the cache, in milliseconds.
    #[arg(long)]
    pub(crate) cache_ttl_ms: u64,
    /// How long the replica runs, in milliseconds: it stops by itself.
    #[arg(long)]
    pub(crate) run_ms: u64,
}

impl ReplicaArgs {
    /// The command-line arguments that give these options back.
    pub(crate) fn to_args(&self) -> Vec<String> {
        let mut args = vec!["replica".to_owned()];
        for (name, value) in [
            ("--redis-url", self.redis_url.clone()),
            ("--id", self.id.to_string()),
            ("--lease-ms", self.lease_ms.to_string()),
            ("--rebuild-ms", self.rebuild_ms.to_string()),
            ("--cache-ttl-ms", self.cache_ttl_ms.to_string()),
            ("--run-ms", self.run_ms.to_string()),
        ] {
            args.extend([name.to_owned(), value]);
        }
        args
    }
}

/// Runs the replica until `--run-ms` passed (or the parent kills it).
pub(crate) fn main(args: &ReplicaArgs) -> Result<(), crate::Error> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(run(args))
}

async fn run(args: &ReplicaArgs) -> Result<(), crate::Error> {
    let lock = RedisLock::from_url(&args.redis_url)?;
    // The cache is on the lock's Redis here: the fenced writes share the lock's connections.
    // On another Redis, take `RedisLock::from_url(cache_url)?.fences()`.
    let fences = lock.fences();
    let locker = Locker::builder(lock)
        .lease(Duration::from_millis(args.lease_ms))
        .build();
    let mut cache = redis::Client::open(args.redis_url.as_str())?
        .get_multiplexed_async_connection()
        .await?;
    let id = args.id;
    let deadline = Instant::now() + Duration::from_millis(args.run_ms);
    // The last value this replica read: what it serves while another one rebuilds.
    let mut copy: Option<String> = None;
    while Instant::now() < deadline {
        let value: Option<String> = redis::cmd("GET")
            .arg(CACHE_KEY)
            .query_async(&mut cache)
            .await?;
        if value.is_some() {
            copy = value;
        } else {
            // Expired: one replica rebuilds, the others serve their stale copy.
            match locker.lock(REBUILD_LOCK).try_acquire().await? {
                Some(guard) => rebuild(&fences, guard, args).await?,
                None => println!("stale {id} 0 {}", copy.as_deref().map_or(0, str::len)),
            }
        }
        tokio::time::sleep(POLL).await;
    }
    Ok(())
}

/// Rebuilds the entry under `guard` and writes it through the fence of [`CACHE_KEY`]: a
/// rebuild that stalled past its lease, after a newer one was written, is refused.
async fn rebuild(
    fences: &distlock::redis::RedisFences,
    guard: Guard,
    args: &ReplicaArgs,
) -> Result<(), crate::Error> {
    let (id, token) = (args.id, guard.fencing_token());
    println!("rebuilding {id} {token}");
    // The expensive part (a slow query, a render). A process stopped here, past its lease,
    // wakes up still believing it holds the lock.
    tokio::time::sleep(Duration::from_millis(args.rebuild_ms)).await;
    let value = format!("report rebuilt by replica {id} with token {token}");
    let fence = guard.fence().for_resource(CACHE_KEY);
    let ttl = Some(Duration::from_millis(args.cache_ttl_ms));
    let outcome = match fences.set(&fence, value.as_bytes(), ttl).await {
        Ok(()) => "ok",
        Err(LockError::Fenced { .. }) => "refused",
        Err(_) => "error",
    };
    println!("wrote {id} {token} {outcome}");
    match guard.release().await {
        Ok(()) | Err(LockError::NotOwned { .. } | LockError::Lost { .. }) => Ok(()),
        Err(error) => Err(error.into()),
    }
}
