//! S5: 10,000 locks held with renewal for a few lease periods, in a process of their own (so
//! its resident memory is that of a service holding them, not of the load tool's other runs).
//! S9: the same with 10,000 read leases, all of one read-write lock (the readers' sorted set
//! then holds all of them) and, for comparison, each of its own name.
//!
//! The parent starts this same binary as a child process ([`crate::child`], role `renewal`);
//! the child takes the leases, holds them while the `Locker`'s watchdog renews them, reads its
//! CPU time and memory from `/proc/self`, counts the renewal batches through a counting wrapper
//! around the backend, releases everything and prints one JSON line.
//!
//! P5 is S5 on `PostgresLock` (the lease table): the same child, with [`Backend::PostgresTable`].
//! E5 is S5 on `EtcdLock`, with [`Backend::Etcd`]: the server's side is counted in gRPC messages
//! (a keep-alive is one) and the member's CPU time. The cost curves (C1, [`crate::curves`])
//! run the same child at 1,000 to 100,000 locks on every backend, MariaDB's lease table
//! ([`Backend::Mysql`]) too, and give it the server's PID for its CPU and memory
//! ([`crate::server_cost`]).

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use lock_core::backend::Lock;
use lock_core::{LockError, LockRequest, Locker, LockerBuilder};
use lock_etcd::EtcdLock;
use lock_mysql::MysqlLock;
use lock_postgres::PostgresLock;
use lock_redis::RedisLock;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::child::{Child, Role};
use crate::counted::Counted;
use crate::info::Probe;
use crate::procfs::{self, Memory};
use crate::server_cost::{Sampler, ServerCost};

/// Locks taken or released at once.
const CONCURRENCY: usize = 64;

/// The lease the target is stated for: CPU shares are also given as if leases were this long.
pub(crate) const TARGET_LEASE: Duration = Duration::from_secs(30);

/// What the leases held are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum HeldLeases {
    /// Exclusive locks (`locker.lock`), each of its own name: S5.
    Locks,
    /// Read leases (`locker.read`), all of one name: S9.
    ReadersOfOneName,
    /// Read leases, each of its own name: S9, for comparison.
    ReadersOfManyNames,
}

impl HeldLeases {
    /// The scenario it belongs to.
    pub(crate) fn scenario(self) -> &'static str {
        match self {
            Self::Locks => "S5",
            Self::ReadersOfOneName | Self::ReadersOfManyNames => "S9",
        }
    }

    /// What is held, for the tables.
    pub(crate) fn describe(self) -> &'static str {
        match self {
            Self::Locks => "locks, each of its own name",
            Self::ReadersOfOneName => "read leases of one name",
            Self::ReadersOfManyNames => "read leases, each of its own name",
        }
    }

    fn request(self, locker: &Locker, i: usize) -> LockRequest {
        match self {
            Self::Locks => locker.lock(format!("s5:{i}")),
            Self::ReadersOfOneName => locker.read("s9:one"),
            Self::ReadersOfManyNames => locker.read(format!("s9:{i}")),
        }
    }
}

/// The backend the child holds its leases on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Backend {
    /// `RedisLock` (S5, S9).
    #[default]
    Redis,
    /// `PostgresLock`, the lease table (P5).
    PostgresTable,
    /// `EtcdLock` on one etcd member (E5); the URL is the member's client URL.
    Etcd,
    /// `MysqlLock`, the lease table on MariaDB (the cost curves only).
    Mysql,
}

/// What the parent asks of the child.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub(crate) struct Params {
    pub(crate) kind: HeldLeases,
    #[serde(default)]
    pub(crate) backend: Backend,
    pub(crate) locks: usize,
    pub(crate) lease_ms: u64,
    pub(crate) periods: u32,
    /// E5: the etcd member's process, whose CPU time the child's probe reads. With it the
    /// child also reports the server's memory and CPU from `/proc` ([`RenewalRun::server`]).
    #[serde(default)]
    pub(crate) server_pid: Option<u32>,
}

impl Params {
    fn lease(&self) -> Duration {
        Duration::from_millis(self.lease_ms)
    }

    /// An upper bound on how long the child runs: the hold, a minute, and 5 ms a lock for
    /// taking and releasing them (the cost curves' 30,000 locks on MariaDB took 150 s in all,
    /// ~4 ms a lock beside the hold).
    pub(crate) fn limit(&self) -> Duration {
        let per_lock = Duration::from_millis(5) * u32::try_from(self.locks).unwrap_or(u32::MAX);
        self.lease() * self.periods + Duration::from_secs(60) + per_lock
    }
}

/// What the child reports.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct RenewalRun {
    pub(crate) kind: HeldLeases,
    #[serde(default)]
    pub(crate) backend: Backend,
    /// Leases held (locks or read leases).
    pub(crate) locks: usize,
    pub(crate) lease_s: f64,
    pub(crate) periods: u32,
    /// How long taking all the locks took.
    pub(crate) acquire_s: f64,
    /// How long they were held while renewing (the measured window).
    pub(crate) hold_s: f64,
    pub(crate) memory_before: MemoryMib,
    pub(crate) memory_held: MemoryMib,
    /// Share of one core the process used while holding (measured at `lease_s`).
    pub(crate) cpu_share: f64,
    /// The same, scaled to a 30 s lease (renewal work is proportional to the renewal rate).
    pub(crate) cpu_share_at_30s_lease: f64,
    /// `extend_many` calls: each is one batch of renewals written back to back on the
    /// connection and awaited together — one round trip.
    pub(crate) renewal_round_trips: u64,
    /// Leases extended by those calls.
    pub(crate) renewals: u64,
    pub(crate) renewals_per_round_trip: f64,
    pub(crate) round_trips_per_period: f64,
    /// EVALSHA calls the server counted in the window.
    pub(crate) server_evalsha: u64,
    /// Every command (Redis) or statement (PostgreSQL, `pg_stat_statements`) the server counted
    /// in the window. On PostgreSQL each extend is a statement of its own, one round trip on
    /// one of the pool's connections.
    #[serde(default)]
    pub(crate) server_statements: u64,
    /// Guards that were no longer held at the end (should be 0).
    pub(crate) lost: usize,
    /// E5: lease keep-alive messages the etcd member received in the window.
    #[serde(default)]
    pub(crate) server_keepalives: u64,
    /// Share of one core the server used in the window (E5: the etcd member's process; 0
    /// where the child cannot tell).
    #[serde(default)]
    pub(crate) server_cpu_share: f64,
    /// The server's memory and CPU from `/proc` (and Redis's `INFO memory`), when the child
    /// was given the server's PID (the cost curves, E5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) server: Option<ServerCost>,
}

/// [`Memory`] for the record.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub(crate) struct MemoryMib {
    pub(crate) rss: f64,
    pub(crate) anon: f64,
    pub(crate) peak: f64,
}

impl From<Memory> for MemoryMib {
    fn from(m: Memory) -> Self {
        Self {
            rss: m.rss_mib,
            anon: m.anon_mib,
            peak: m.peak_mib,
        }
    }
}

impl RenewalRun {
    /// The scenario it belongs to: S5, S9, or P5 (S5 on PostgreSQL).
    pub(crate) fn scenario(&self) -> &'static str {
        match self.backend {
            Backend::Redis => self.kind.scenario(),
            Backend::PostgresTable => "P5",
            Backend::Etcd => "E5",
            Backend::Mysql => "C1",
        }
    }
}

/// Runs the child for `params` against `url` and reads its report (parent side). Blocking.
pub(crate) fn run(url: &str, runtime: &str, params: Params) -> Result<RenewalRun, String> {
    let what = format!("the {} child", params.kind.scenario());
    let child = Child::spawn(Role::Renewal, &what, url, runtime, &params)?;
    child.report(std::time::Instant::now() + params.limit())
}

/// The child: takes, holds and releases the locks; returns its report.
pub(crate) async fn child(url: &str, params: Params) -> Result<RenewalRun, String> {
    let err = |e: LockError| e.to_string();
    let memory_before = procfs::memory();
    let (counting, mut probe) = match params.backend {
        Backend::Redis => (
            Arc::new(Counted::new(Arc::new(
                RedisLock::from_url(url).map_err(err)?,
            ))),
            Probe::connect(&[url.to_owned()])
                .await
                .map_err(|e| e.to_string())?,
        ),
        Backend::PostgresTable => {
            let lock = PostgresLock::from_url(url).map_err(err)?;
            lock.migrate().await.map_err(err)?;
            (
                Arc::new(Counted::new(Arc::new(lock))),
                Probe::postgres(url, params.server_pid)
                    .await
                    .map_err(|e| e.to_string())?,
            )
        }
        Backend::Etcd => {
            // `http://10.213.S.N:2379`: the member's own address, in its network namespace.
            let addr = url
                .strip_prefix("http://")
                .and_then(|rest| {
                    rest.trim_end_matches('/')
                        .parse::<std::net::SocketAddr>()
                        .ok()
                })
                .ok_or_else(|| format!("E5: no address in the etcd URL {url:?}"))?;
            (
                Arc::new(Counted::new(Arc::new(EtcdLock::new([url]).map_err(err)?))),
                Probe::etcd(addr, params.server_pid),
            )
        }
        Backend::Mysql => {
            let lock = MysqlLock::from_url(url).map_err(err)?;
            lock.migrate().await.map_err(err)?;
            // The server is not probed for statements; its CPU and memory come from /proc.
            (Arc::new(Counted::new(Arc::new(lock))), Probe::client_only())
        }
    };
    let redis_url = (params.backend == Backend::Redis).then_some(url);
    let mut sampler = Sampler::new(params.server_pid, redis_url).await?;
    let server_before = match &mut sampler {
        Some(s) => Some(s.memory().await?),
        None => None,
    };
    let locker = LockerBuilder::from_arc(Arc::clone(&counting) as Arc<dyn Lock>)
        .lease(params.lease())
        .build();

    let started = Instant::now();
    let guards = take_all(&locker, params.kind, params.locks).await?;
    let acquire_s = started.elapsed().as_secs_f64();

    let (batches0, renewals0) = counting.renewals();
    let before = probe.snapshot().await.map_err(|e| e.to_string())?;
    let cpu0 = procfs::cpu_time();
    let server_cpu0 = sampler.as_ref().map_or(0.0, Sampler::cpu_seconds);
    let window = Instant::now();
    tokio::time::sleep(params.lease() * params.periods).await;
    let hold = window.elapsed();
    let cpu = procfs::cpu_time().saturating_sub(cpu0);
    let server_cpu = sampler.as_ref().map_or(0.0, Sampler::cpu_seconds) - server_cpu0;
    let after = probe.snapshot().await.map_err(|e| e.to_string())?;
    let window_delta = before.until(&after);
    let (batches1, renewals1) = counting.renewals();
    let memory_held = procfs::memory();
    let server = match (&mut sampler, server_before) {
        (Some(s), Some(before)) => Some(ServerCost {
            before,
            held: s.memory().await?,
            cpu_share: server_cpu.max(0.0) / hold.as_secs_f64(),
        }),
        _ => None,
    };
    let lost = guards.iter().filter(|g| !g.is_held()).count();

    futures::stream::iter(guards)
        .map(|guard| async move { guard.release().await })
        .buffer_unordered(CONCURRENCY)
        .for_each(|_| async {})
        .await;

    let cpu_share = cpu.as_secs_f64() / hold.as_secs_f64();
    let lease_s = params.lease().as_secs_f64();
    let round_trips = batches1 - batches0;
    let renewals = renewals1 - renewals0;
    Ok(RenewalRun {
        kind: params.kind,
        backend: params.backend,
        locks: params.locks,
        lease_s,
        periods: params.periods,
        acquire_s,
        hold_s: hold.as_secs_f64(),
        memory_before: memory_before.into(),
        memory_held: memory_held.into(),
        cpu_share,
        cpu_share_at_30s_lease: cpu_share * lease_s / TARGET_LEASE.as_secs_f64(),
        renewal_round_trips: round_trips,
        renewals,
        renewals_per_round_trip: crate::stats::ratio(renewals as f64, round_trips as f64),
        round_trips_per_period: round_trips as f64 / f64::from(params.periods.max(1)),
        server_evalsha: window_delta.calls("evalsha"),
        server_statements: window_delta.total_calls(),
        lost,
        server_keepalives: window_delta.calls("leasekeepalive"),
        server_cpu_share: window_delta.server_cpu_share(),
        server,
    })
}

/// Takes `n` leases of `kind`. Outside a tokio task (the child's `block_on`), so one name's
/// read leases are each a lease of its own, not nested guards on the first.
async fn take_all(
    locker: &Locker,
    kind: HeldLeases,
    n: usize,
) -> Result<Vec<lock_core::Guard>, String> {
    let results: Vec<_> = futures::stream::iter(0..n)
        .map(|i| {
            let request = kind.request(locker, i);
            async move { request.try_acquire().await }
        })
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    let mut guards = Vec::with_capacity(n);
    for result in results {
        match result {
            Ok(Some(guard)) => guards.push(guard),
            Ok(None) => return Err(format!("{}: a lease was busy", kind.scenario())),
            Err(e) => return Err(format!("{}: taking a lease: {e}", kind.scenario())),
        }
    }
    Ok(guards)
}
