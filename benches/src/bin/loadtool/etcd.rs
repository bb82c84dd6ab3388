//! E1, E2, E3, E5 and the failover, the etcd scenarios: distlock on etcd (`EtcdLock`), on
//! throwaway etcd members of lock-testkit's.
//!
//! - E1: S1's loop (one task, acquire + release) through distlock's `Locker`, judged against
//!   the bare etcd transactions the same client (etcd-client) sends, in the same run and the
//!   same rounds: a put-if-absent transaction on a lease and a compare-and-delete transaction
//!   (the protocol's two round trips, on one lease granted beforehand), and, for what a lease
//!   of each grant's own costs, the same with a lease granted before and revoked after each
//!   cycle (what `EtcdLock` sent before its shared lease for renewed grants).
//!   Beside distlock's renewed grants, its grants of a fixed TTL (`.fixed_ttl`, the
//!   `Lock::try_acquire` path), which issue 51 holds to ≥ 0.8× the hand-written lock.
//! - E2: E1 on S2's 32 tasks, each its own name (issue 38: ≥ 0.9× the hand-written lock).
//! - E3: S3's handoff (8 workers on one name, 1 ms holds), distlock's defaults.
//! - E5: S5's 10,000 renewed locks in a child process: keep-alive messages and CPU (the
//!   child's and the member's) per lease period.
//! - Failover: on a 3-member cluster, one task takes and releases the lock in a loop; the
//!   member that leads is killed, and the time from the kill to the next grant is recorded;
//!   the member is started again and the cluster left to heal before the next kill.
//!
//! E1, E2, E3 and E5 run on one member (the figures are the client's and one server's cost, as
//! P1's are on one PostgreSQL); the failover needs three.

use std::sync::Arc;
use std::time::Duration;

use lock_core::Locker;
use lock_etcd::EtcdLock;
use lock_testkit::{EtcdCluster, EtcdNetwork};
use serde::Serialize;
use tokio::runtime::Runtime;
use tokio::time::Instant;

use crate::cli::{Part, Plan};
use crate::cycles::{self, Client as CycleClient, CycleRun};
use crate::etcd_bare::BareEtcd;
use crate::handoff::{self, Contender, HandoffRun};
use crate::info::Probe;
use crate::progress::Progress;
use crate::renewal::{self, Backend, HeldLeases, RenewalRun};
use crate::stats::{Latency, nanos, ratio};
use crate::step::{block, slug};
use crate::target::{Target, not_run, target};
use crate::window::Timing;

/// distlock on etcd, through its `Locker`.
pub(crate) const DISTLOCK: &str = "distlock etcd";
/// The same with `.fixed_ttl(TTL)`: a grant the `Locker` does not renew (`Lock::try_acquire`).
pub(crate) const DISTLOCK_FIXED: &str = "distlock etcd, fixed ttl";
/// The protocol's two transactions alone, on one lease granted beforehand.
pub(crate) const BARE: &str = "bare etcd: put-if-absent txn + compare-and-delete txn";
/// The requests `EtcdLock` sends for a cycle, alone: a lease per grant.
pub(crate) const BARE_OWN_LEASE: &str = "bare etcd: lease grant + both txns + revoke";
/// Who runs E1, in this order.
pub(crate) const E1_CLIENTS: [&str; 4] = [DISTLOCK, BARE, BARE_OWN_LEASE, DISTLOCK_FIXED];
/// The order E1's and E2's clients run in each round (indices into [`E1_CLIENTS`]): the bare
/// clients first, then distlock, so a slow patch of the shared machine weighs on all alike.
const ROUND: [usize; 4] = [1, 2, 0, 3];
/// [`E1_CLIENTS`] in the order each round runs them (the progress plan's steps).
pub(crate) const ROUND_ORDER: [&str; 4] = [
    E1_CLIENTS[ROUND[0]],
    E1_CLIENTS[ROUND[1]],
    E1_CLIENTS[ROUND[2]],
    E1_CLIENTS[ROUND[3]],
];

/// How long the failover's task waits for one grant (the election and the client's move to
/// another member fit in it).
const FAILOVER_WAIT: Duration = Duration::from_secs(30);
/// How long the cluster may take to heal after the killed member is started again.
const FAILOVER_HEAL: Duration = Duration::from_secs(30);
/// The failover's command timeout: a request to the killed member fails after this, and the
/// client tries another.
const FAILOVER_COMMAND_TIMEOUT: Duration = Duration::from_millis(500);
/// E5's shortest lease: with 2 s leases, a quick run lost 8,848 of 10,000 locks while renewing
/// them on one member (each renewal is a keep-alive, a transaction and a TTL read of its own
/// lease), so E5 renews at this lease or longer; its CPU is also given scaled to 30 s.
const E5_MIN_LEASE: Duration = Duration::from_secs(10);
/// The lease the failover's task takes.
const FAILOVER_TTL: Duration = Duration::from_secs(2);

/// The failover's measurements.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct FailoverRun {
    pub(crate) members: usize,
    /// Leaders killed.
    pub(crate) kills: usize,
    /// From the kill to the next grant the looping task got.
    pub(crate) kill_to_grant: Latency,
    /// Every sample, ms.
    pub(crate) kill_to_grant_ms: Vec<f64>,
    /// From the kill until the remaining members agreed on a new leader (lock-testkit's
    /// polling of their status, every 50 ms).
    pub(crate) kill_to_leader: Latency,
    /// Cycles the task completed over the whole part.
    pub(crate) cycles: u64,
    /// Failed acquires and releases (a release that hit the killed member, say).
    pub(crate) errors: u64,
    pub(crate) first_error: Option<String>,
    /// The `EtcdLock`'s command timeout.
    pub(crate) command_timeout_ms: u64,
    /// The lease the task took.
    pub(crate) ttl_ms: u64,
}

/// Everything E1, E2, E3, E5 and the failover measured.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct EtcdRun {
    /// The etcd binary's version, as lock-testkit knows it.
    pub(crate) version: &'static str,
    pub(crate) e1: Vec<CycleRun>,
    /// E2: E1's clients on S2's tasks, each its own name.
    #[serde(default)]
    pub(crate) e2: Vec<CycleRun>,
    pub(crate) e3: Option<HandoffRun>,
    pub(crate) e5: Option<RenewalRun>,
    pub(crate) failover: Option<FailoverRun>,
}

impl EtcdRun {
    /// E1's run of `client`.
    pub(crate) fn e1(&self, client: &str) -> Option<&CycleRun> {
        self.e1.iter().find(|r| r.client == client)
    }

    /// E2's run of `client`.
    pub(crate) fn e2(&self, client: &str) -> Option<&CycleRun> {
        self.e2.iter().find(|r| r.client == client)
    }
}

/// Starts the members and runs the etcd parts of `plan`.
pub(crate) fn run(
    plan: &Plan,
    runtime: &Runtime,
    progress: &mut Progress,
) -> Result<EtcdRun, String> {
    let mut out = EtcdRun {
        version: lock_testkit::ETCD_VERSION,
        e1: Vec::new(),
        e2: Vec::new(),
        e3: None,
        e5: None,
        failover: None,
    };
    if plan.has(Part::E1) || plan.has(Part::E2) || plan.has(Part::E3) || plan.has(Part::E5) {
        progress.next();
        // Loopback: the load tool never partitions, runs as the user, and leaves no network
        // namespace behind even as root.
        let cluster = EtcdCluster::builder()
            .network(EtcdNetwork::Loopback)
            .start()
            .map_err(|e| format!("starting etcd: {e}"))?;
        let member = cluster.member(0);
        let endpoint = member.direct_endpoint();
        let mut probe = Probe::etcd(member.client_addr(), member.pid());
        if plan.has(Part::E1) {
            let on = Cycles {
                scenario: "E1",
                tasks: 1,
            };
            out.e1 = cycle_rounds(on, plan, runtime, progress, &endpoint, &mut probe)?;
        }
        if plan.has(Part::E2) {
            let on = Cycles {
                scenario: "E2",
                tasks: plan.s2_tasks,
            };
            out.e2 = cycle_rounds(on, plan, runtime, progress, &endpoint, &mut probe)?;
        }
        if plan.has(Part::E3) {
            progress.next();
            let contender = Contender::Locker(Locker::new(lock(&endpoint)?));
            out.e3 = Some(block(
                runtime,
                plan.contention.warmup + plan.contention.measure,
                handoff::run(
                    DISTLOCK,
                    contender,
                    "e3:one",
                    plan.s3_workers,
                    plan.s3_hold,
                    plan.contention,
                    &mut probe,
                ),
            )??);
        }
        if plan.has(Part::E5) {
            progress.next();
            let params = renewal::Params {
                kind: HeldLeases::Locks,
                backend: Backend::Etcd,
                locks: plan.s5_locks,
                // etcd counts leases in whole seconds; below E5_MIN_LEASE a single member
                // did not keep up with 10,000 leases of their own (most were lost).
                lease_ms: plan.s5_lease.as_secs().max(E5_MIN_LEASE.as_secs()) * 1_000,
                periods: plan.s5_periods,
                server_pid: member.pid(),
            };
            out.e5 = Some(renewal::run(&endpoint, plan.runtime.as_arg(), params)?);
        }
        drop(cluster);
    }
    if plan.has(Part::EFailover) {
        progress.next();
        out.failover = Some(failover(runtime, plan.failovers())?);
    }
    Ok(out)
}

/// Which cycle scenario runs: E1 (one task) or E2 (S2's tasks, each its own name).
#[derive(Clone, Copy)]
struct Cycles {
    scenario: &'static str,
    tasks: usize,
}

/// E1 and E2: rounds of the two bare clients, then distlock; like S1's and S2's.
fn cycle_rounds(
    on: Cycles,
    plan: &Plan,
    runtime: &Runtime,
    progress: &mut Progress,
    endpoint: &str,
    probe: &mut Probe,
) -> Result<Vec<CycleRun>, String> {
    let made: Vec<CycleClient> = block(runtime, Duration::ZERO, async {
        let mut made = Vec::new();
        for label in E1_CLIENTS {
            made.push(match label {
                DISTLOCK => CycleClient::Locker(Locker::new(lock(endpoint)?), None),
                DISTLOCK_FIXED => {
                    CycleClient::Locker(Locker::new(lock(endpoint)?), Some(cycles::TTL))
                }
                BARE => CycleClient::EtcdBare(Box::new(
                    BareEtcd::connect(endpoint, true, cycles::TTL).await?,
                )),
                _ => CycleClient::EtcdBare(Box::new(
                    BareEtcd::connect(endpoint, false, cycles::TTL).await?,
                )),
            });
        }
        Ok::<_, String>(made)
    })??;
    let timing = Timing {
        warmup: plan.cycles.warmup / plan.s1_rounds,
        measure: plan.cycles.measure / plan.s1_rounds,
    };
    let mut windows: Vec<Vec<cycles::Window>> = E1_CLIENTS.iter().map(|_| Vec::new()).collect();
    for _ in 0..plan.s1_rounds {
        for i in ROUND {
            progress.next();
            let label = E1_CLIENTS[i];
            windows[i].push(block(
                runtime,
                timing.warmup + timing.measure,
                cycles::measure(
                    label,
                    made[i].clone(),
                    &format!("{}:{}", on.scenario.to_lowercase(), slug(label)),
                    on.tasks,
                    timing,
                    probe,
                ),
            )??);
        }
    }
    Ok(E1_CLIENTS
        .iter()
        .zip(windows)
        .map(|(label, w)| CycleRun::from_windows(on.scenario, label, on.tasks, w))
        .collect())
}

/// An `EtcdLock` on one member with the defaults.
fn lock(endpoint: &str) -> Result<EtcdLock, String> {
    EtcdLock::new([endpoint]).map_err(|e| e.to_string())
}

/// The failover part: `kills` times, the leader of a 3-member cluster killed under a task
/// that takes and releases the lock in a loop.
fn failover(runtime: &Runtime, kills: usize) -> Result<FailoverRun, String> {
    let mut cluster = EtcdCluster::builder()
        .members(3)
        .network(EtcdNetwork::Loopback)
        .start()
        .map_err(|e| format!("starting a 3-member etcd: {e}"))?;
    let lock = EtcdLock::builder()
        .endpoints(cluster.endpoints())
        .command_timeout(FAILOVER_COMMAND_TIMEOUT)
        .connect_timeout(FAILOVER_COMMAND_TIMEOUT)
        .build()
        .map_err(|e| e.to_string())?;
    let locker = Locker::builder(lock)
        .lease(FAILOVER_TTL)
        .wait(FAILOVER_WAIT)
        .build();
    let looping = Arc::new(Loop::default());
    let task = runtime.spawn(run_loop(locker, Arc::clone(&looping)));
    let mut to_grant = Vec::with_capacity(kills);
    let mut to_leader = Vec::with_capacity(kills);
    let mut failure = None;
    for _ in 0..kills {
        // Steady state first: a grant after the cluster healed.
        if let Err(e) = looping.grant_after(runtime, Instant::now(), FAILOVER_WAIT) {
            failure = Some(format!("no grant before the kill: {e}"));
            break;
        }
        let leader = cluster.leader().map_err(|e| e.to_string())?;
        let killed_at = Instant::now();
        cluster.kill(leader);
        let elected = cluster.leader();
        let elected_after = killed_at.elapsed();
        match looping.grant_after(runtime, killed_at, FAILOVER_WAIT) {
            Ok(at) => to_grant.push(nanos(at.duration_since(killed_at))),
            Err(e) => {
                failure = Some(format!("no grant after the kill: {e}"));
                break;
            }
        }
        if elected.is_ok() {
            to_leader.push(nanos(elected_after));
        }
        cluster.restart(leader).map_err(|e| e.to_string())?;
        cluster
            .wait_healthy(FAILOVER_HEAL)
            .map_err(|e| e.to_string())?;
    }
    looping
        .stop
        .store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = runtime.block_on(async { tokio::time::timeout(FAILOVER_WAIT, task).await });
    if let Some(failure) = failure {
        return Err(format!("failover: {failure}"));
    }
    let samples_ms = to_grant.iter().map(|ns| *ns as f64 / 1e6).collect();
    let state = looping.state();
    Ok(FailoverRun {
        members: cluster.len(),
        kills: to_grant.len(),
        kill_to_grant: Latency::from_nanos(&mut to_grant),
        kill_to_grant_ms: samples_ms,
        kill_to_leader: Latency::from_nanos(&mut to_leader),
        cycles: state.cycles,
        errors: state.errors,
        first_error: state.first_error,
        command_timeout_ms: u64::try_from(FAILOVER_COMMAND_TIMEOUT.as_millis()).unwrap_or(0),
        ttl_ms: u64::try_from(FAILOVER_TTL.as_millis()).unwrap_or(0),
    })
}

/// What the failover's looping task shares with the part.
#[derive(Default)]
struct Loop {
    stop: std::sync::atomic::AtomicBool,
    state: std::sync::Mutex<LoopState>,
}

#[derive(Default, Clone)]
struct LoopState {
    /// When the last grant came.
    last_grant: Option<Instant>,
    cycles: u64,
    errors: u64,
    first_error: Option<String>,
}

impl Loop {
    fn state(&self) -> LoopState {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Waits (polling every ms, at most `within`) for a grant after `since`; when it came.
    fn grant_after(
        &self,
        runtime: &Runtime,
        since: Instant,
        within: Duration,
    ) -> Result<Instant, String> {
        runtime.block_on(async {
            let deadline = Instant::now() + within;
            loop {
                if let Some(at) = self.state().last_grant.filter(|at| *at >= since) {
                    return Ok(at);
                }
                if Instant::now() >= deadline {
                    return Err(format!(
                        "none within {within:?} (last error: {:?})",
                        self.state().first_error
                    ));
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        })
    }
}

/// Takes and releases `failover:one` until told to stop, recording each grant's time.
async fn run_loop(locker: Locker, shared: Arc<Loop>) {
    use std::sync::atomic::Ordering;
    while !shared.stop.load(Ordering::Relaxed) {
        let outcome = match locker.lock("failover:one").acquire().await {
            Ok(guard) => {
                let at = Instant::now();
                {
                    let mut state = shared
                        .state
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                    state.last_grant = Some(at);
                    state.cycles += 1;
                }
                guard.release().await.map_err(|e| e.to_string())
            }
            Err(e) => Err(e.to_string()),
        };
        if let Err(e) = outcome {
            {
                let mut state = shared
                    .state
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                state.errors += 1;
                state.first_error.get_or_insert(e);
            }
            // A failed round: a pause, so an unreachable cluster is not spun on.
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// The etcd targets (E1, E2, E3, E5 and the failover).
pub(crate) fn targets(run: Option<&EtcdRun>) -> Vec<Target> {
    let mut out = Vec::new();
    let what =
        "E1 etcd: cycles/s against its bare transactions (put-if-absent + compare-and-delete)";
    out.push(
        match run.and_then(|r| Some((r.e1(DISTLOCK)?, r.e1(BARE)?))) {
            Some((distlock, bare)) => {
                let share = ratio(distlock.per_second, bare.per_second);
                target(
                    "E1 etcd vs bare",
                    "23",
                    what,
                    "≥ 80 %",
                    format!(
                        "{:.0} % ({:.0} of {:.0}/s)",
                        share * 100.0,
                        distlock.per_second,
                        bare.per_second
                    ),
                    share >= 0.80,
                )
            }
            None => not_run("E1 etcd vs bare", "23", what, "≥ 80 %"),
        },
    );
    // Issue 38: S1 and S2 at 0.9x the hand-written etcd lock (the bare transactions).
    for (label, runs) in [
        (
            "E1 etcd vs hand-written",
            run.map(|r| (r.e1(DISTLOCK), r.e1(BARE))),
        ),
        (
            "E2 etcd vs hand-written",
            run.map(|r| (r.e2(DISTLOCK), r.e2(BARE))),
        ),
    ] {
        let what = "cycles/s against the hand-written etcd lock (its bare transactions)";
        out.push(match runs {
            Some((Some(distlock), Some(bare))) => {
                let share = ratio(distlock.per_second, bare.per_second);
                target(
                    label,
                    "38",
                    what,
                    "≥ 0.9×",
                    format!(
                        "{share:.2}× ({:.0} of {:.0}/s)",
                        distlock.per_second, bare.per_second
                    ),
                    share >= 0.9,
                )
            }
            _ => not_run(label, "38", what, "≥ 0.9×"),
        });
    }
    // Issue 51: grants of a fixed TTL at 0.8x the hand-written etcd lock.
    for (label, runs) in [
        (
            "E1 etcd fixed ttl vs hand-written",
            run.map(|r| (r.e1(DISTLOCK_FIXED), r.e1(BARE))),
        ),
        (
            "E2 etcd fixed ttl vs hand-written",
            run.map(|r| (r.e2(DISTLOCK_FIXED), r.e2(BARE))),
        ),
    ] {
        let what = "fixed-TTL cycles/s against the hand-written etcd lock (its bare transactions)";
        out.push(match runs {
            Some((Some(fixed), Some(bare))) => {
                let share = ratio(fixed.per_second, bare.per_second);
                target(
                    label,
                    "51",
                    what,
                    "≥ 0.8×",
                    format!(
                        "{share:.2}× ({:.0} of {:.0}/s)",
                        fixed.per_second, bare.per_second
                    ),
                    share >= 0.8,
                )
            }
            _ => not_run(label, "51", what, "≥ 0.8×"),
        });
    }
    let what = "E3 etcd: grants won by the worker that just released (8 workers, one name)";
    out.push(match run.and_then(|r| r.e3.as_ref()) {
        Some(e3) => target(
            "E3 etcd self-handoff",
            "23",
            what,
            "0 %",
            format!("{:.1} %", e3.self_handoff * 100.0),
            e3.self_handoff == 0.0,
        ),
        None => not_run("E3 etcd self-handoff", "23", what, "0 %"),
    });
    out
}
