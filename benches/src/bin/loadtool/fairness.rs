//! S10: fairness across processes. Several OS processes (this binary, [`crate::child`] role
//! `fairness`), each with its own `Locker` on its own `RedisLock` (its own connections), run a
//! few tasks each on one name, holding it ~1 ms as S3's workers do: once with the plain mutex
//! (`locker.lock`), which hands the name to a waiter of the same process and so favours the
//! process that holds it, then with the fair lock (`locker.fair`), which grants the name in
//! the order the processes asked.
//!
//! The window is one for all the processes: the parent waits until every child is connected
//! (`ready`), then sends each the start and end of the window on the shared clock
//! ([`crate::clock`], `CLOCK_MONOTONIC`). Every grant is sent back with its fencing token and
//! its grant and release times on that clock: the tokens order the grants (the server issues
//! them, strictly increasing, under the lock), the times give the handoff gaps.
//!
//! Correctness across processes: under the lock each holder `INCR`s an "inside" key and `GET`s
//! a counter, holds, then `SET`s the counter to the value it read plus one and `DECR`s the
//! key — on a second server, so that these commands stay out of the lock's count. An "inside"
//! other than 1 is an exclusion violation; a counter short of the acquisitions is a lost update.
//!
//! P10 is S10 on `PostgresLock` (the lease table): the same children, with
//! [`Backend::PostgresTable`]; the counter stays on Redis.

use std::sync::Arc;
use std::time::Duration;

use lock_core::{Guard, LockError, LockRequest, Locker};
use lock_postgres::PostgresLock;
use lock_redis::RedisLock;
use redis::aio::MultiplexedConnection;
use serde::{Deserialize, Serialize};
use tokio::runtime::Runtime;
use tokio::time::Instant;

use crate::child::{self, Child, Role};
use crate::clock;
use crate::info::{Cost, Probe};
use crate::renewal::Backend;
use crate::stats::{Latency, nanos, ratio};
use crate::window::Timing;

/// No task takes the lock more often than this, whatever the clock says.
const MAX_ACQUISITIONS_PER_TASK: u64 = 10_000_000;

/// How long a child may take to start and connect.
const STARTUP: Duration = Duration::from_secs(20);

/// How long the tasks may take to finish after the end of the window (each waits at most the
/// default wait for its last acquisition).
const FINISH_WITHIN: Duration = Duration::from_secs(30);

/// What the tasks ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Asked {
    /// `locker.lock(name)`: the plain mutex.
    Plain,
    /// `locker.fair(name)`: the fair lock.
    Fair,
}

/// The plain mutex in S10's tables.
pub(crate) const PLAIN: &str = "plain lock (locker.lock)";
/// The fair lock in S10's tables.
pub(crate) const FAIR: &str = "fair lock (locker.fair)";

impl Asked {
    /// The label in the tables.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Self::Plain => PLAIN,
            Self::Fair => FAIR,
        }
    }

    fn slug(self) -> &'static str {
        match self {
            Self::Plain => "plain",
            Self::Fair => "fair",
        }
    }

    fn request(self, locker: &Locker, name: &Arc<str>) -> LockRequest {
        match self {
            Self::Plain => locker.lock(Arc::clone(name)),
            Self::Fair => locker.fair(Arc::clone(name)),
        }
    }
}

/// What the parent asks of one child.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Params {
    pub(crate) asked: Asked,
    /// The lock's backend.
    #[serde(default)]
    pub(crate) backend: Backend,
    /// This child's number.
    pub(crate) process: usize,
    pub(crate) tasks: usize,
    pub(crate) hold_us: u64,
    /// The lock's name.
    pub(crate) name: String,
    /// The server of the counter and the "inside" key, and their keys.
    pub(crate) counter_url: String,
    pub(crate) counter_key: String,
    pub(crate) inside_key: String,
}

/// The window, sent to every child once all are ready: `CLOCK_MONOTONIC` nanoseconds.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
struct Window {
    start_ns: u64,
    end_ns: u64,
}

/// One grant, as the task that had it saw it.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub(crate) struct FencedGrant {
    pub(crate) task: usize,
    /// The grant's fencing token: the order of the grants.
    pub(crate) fence: u64,
    /// When the task had the grant, sent its release, and had the release's reply (shared
    /// clock, ns).
    pub(crate) granted_ns: u64,
    pub(crate) releasing_ns: u64,
    pub(crate) released_ns: u64,
}

/// What one child reports.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ChildReport {
    pub(crate) process: usize,
    /// Every grant of the run, warm-up and the last ones after the window included.
    pub(crate) grants: Vec<FencedGrant>,
    /// Times a holder found another inside.
    pub(crate) violations: u64,
    pub(crate) errors: u64,
    pub(crate) first_error: Option<String>,
    /// This process's CPU time over the window, seconds (10 ms resolution).
    pub(crate) cpu_s: f64,
}

/// The result of one lock in S10.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct FairnessRun {
    /// S10, or P10 (on PostgreSQL).
    pub(crate) scenario: &'static str,
    pub(crate) client: &'static str,
    pub(crate) asked: Asked,
    pub(crate) processes: usize,
    pub(crate) tasks_per_process: usize,
    /// How long each holds the lock (asked for; the timer rounds it up).
    pub(crate) hold_ms: f64,
    /// Grants in the measured window, all processes.
    pub(crate) acquisitions: u64,
    pub(crate) seconds: f64,
    pub(crate) per_second: f64,
    /// Grants in the window per process, and the largest over the smallest (`None`: a process
    /// had none).
    pub(crate) per_process: Vec<u64>,
    pub(crate) process_max_min: Option<f64>,
    /// Grants in the window per task (`per_task[process][task]`), and the largest over the
    /// smallest of all of them.
    pub(crate) per_task: Vec<Vec<u64>>,
    pub(crate) task_max_min: Option<f64>,
    /// From the moment the holder had the release's reply to the moment the next holder (in
    /// fencing-token order, whatever its process) had its grant.
    pub(crate) gap: Latency,
    /// Share of the handoffs that stayed in the process that released, and with the same task.
    pub(crate) same_process_handoff: f64,
    pub(crate) self_handoff: f64,
    /// The longest run of consecutive grants to one process.
    pub(crate) longest_process_run: u64,
    /// How long holds really lasted, from the grant to the release (the counter's round trips
    /// included).
    pub(crate) hold: Latency,
    /// Server commands per acquisition (the lock's server alone), server CPU; client CPU is
    /// the children's, summed.
    pub(crate) cost: Cost,
    /// Every acquisition of the run, warm-up included, and the counter they incremented.
    pub(crate) total_acquisitions: u64,
    pub(crate) counter: u64,
    /// `total_acquisitions - counter`: increments lost because two held the lock at once.
    pub(crate) lost_updates: u64,
    pub(crate) exclusion_violations: u64,
    /// Grants after the previous one in token order whose fencing token was not above it
    /// (two grants with one token), should be 0.
    pub(crate) duplicate_tokens: u64,
    /// Grants stamped before the previous holder's release reply (the replies reached two
    /// processes in the other order), counted as a zero gap.
    pub(crate) reordered_timestamps: u64,
    pub(crate) errors: u64,
    pub(crate) first_error: Option<String>,
}

impl FairnessRun {
    /// Whether the run saw anything the lock rules out, or errors.
    pub(crate) fn failed(&self) -> bool {
        self.errors > 0
            || self.lost_updates > 0
            || self.exclusion_violations > 0
            || self.duplicate_tokens > 0
    }
}

/// The servers and settings of one S10 run, from the parent.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Setup<'a> {
    /// S10, or P10 (on PostgreSQL).
    pub(crate) scenario: &'static str,
    /// The lock's backend, and its server (probed).
    pub(crate) backend: Backend,
    pub(crate) url: &'a str,
    /// The counter's server.
    pub(crate) counter_url: &'a str,
    /// The children's runtime flavour (`--runtime`).
    pub(crate) runtime: &'a str,
    pub(crate) processes: usize,
    pub(crate) tasks: usize,
    pub(crate) hold: Duration,
    pub(crate) timing: Timing,
}

/// Runs `asked` in `setup.processes` child processes (parent side; blocks on `runtime` for the
/// server probes).
pub(crate) fn run(
    runtime: &Runtime,
    probe: &mut Probe,
    setup: Setup<'_>,
    asked: Asked,
) -> Result<FairnessRun, String> {
    // The scenario in the name: S10 and P10 keep their counters on one Redis.
    let name = format!("{}:{}", setup.scenario.to_lowercase(), asked.slug());
    let counter_key = format!("{name}:counter");
    let inside_key = format!("{name}:inside");
    let mut children = (0..setup.processes)
        .map(|process| {
            let params = Params {
                asked,
                backend: setup.backend,
                process,
                tasks: setup.tasks,
                hold_us: u64::try_from(setup.hold.as_micros()).unwrap_or(u64::MAX),
                name: name.clone(),
                counter_url: setup.counter_url.to_owned(),
                counter_key: counter_key.clone(),
                inside_key: inside_key.clone(),
            };
            let what = format!("{} {} child {process}", setup.scenario, asked.slug());
            Child::spawn(Role::Fairness, &what, setup.url, setup.runtime, &params)
        })
        .collect::<Result<Vec<_>, _>>()?;
    for child in &mut children {
        match child.line(STARTUP)? {
            line if line == "ready" => {}
            other => {
                return Err(format!(
                    "{}: a child said {other:?} instead of ready",
                    setup.scenario
                ));
            }
        }
    }
    let start_ns = clock::after(setup.timing.warmup);
    let window = Window {
        start_ns,
        end_ns: start_ns + nanos(setup.timing.measure),
    };
    let go = serde_json::to_string(&window).map_err(|e| e.to_string())?;
    for child in &mut children {
        child.send(&go)?;
    }
    let before = runtime.block_on(async {
        clock::sleep_until(window.start_ns).await;
        probe.snapshot().await
    });
    let before = before.map_err(|e| e.to_string())?;
    let deadline =
        std::time::Instant::now() + setup.timing.measure + FINISH_WITHIN + Duration::from_secs(5);
    let reports = children
        .into_iter()
        .map(|child| child.report::<ChildReport>(deadline))
        .collect::<Result<Vec<_>, _>>()?;
    let (after, counter) = runtime
        .block_on(async {
            let after = probe.snapshot().await?;
            let mut conn = redis::Client::open(setup.counter_url)?
                .get_multiplexed_async_connection()
                .await?;
            let counter: Option<u64> = redis::cmd("GET")
                .arg(&counter_key)
                .query_async(&mut conn)
                .await?;
            Ok::<_, redis::RedisError>((after, counter.unwrap_or(0)))
        })
        .map_err(|e| e.to_string())?;
    let mut out = analyse(asked, setup, window, &reports, counter);
    // The work ran in the children: their CPU, not the parent's.
    let children_cpu: f64 = reports.iter().map(|r| r.cpu_s).sum();
    out.cost = Cost {
        client_cpu_us_per_op: children_cpu * 1e6 / out.acquisitions.max(1) as f64,
        client_cpu_share: ratio(children_cpu, out.seconds),
        ..before.cost_until(&after, out.acquisitions)
    };
    Ok(out)
}

/// The run's figures from the children's grants.
fn analyse(
    asked: Asked,
    setup: Setup<'_>,
    window: Window,
    reports: &[ChildReport],
    counter: u64,
) -> FairnessRun {
    let measured = |g: &FencedGrant| (window.start_ns..window.end_ns).contains(&g.granted_ns);
    let mut grants: Vec<(usize, FencedGrant)> = Vec::new();
    let mut per_process = vec![0; reports.len()];
    let mut per_task = vec![vec![0; setup.tasks]; reports.len()];
    let (mut errors, mut first_error, mut violations) = (0, None, 0);
    for (process, report) in reports.iter().enumerate() {
        for grant in &report.grants {
            grants.push((process, *grant));
            if measured(grant) {
                per_process[process] += 1;
                if let Some(n) = per_task[process].get_mut(grant.task) {
                    *n += 1;
                }
            }
        }
        errors += report.errors;
        violations += report.violations;
        if first_error.is_none() {
            first_error.clone_from(&report.first_error);
        }
    }
    grants.sort_by_key(|(_, g)| g.fence);
    let handoffs = handoffs(&grants, measured);
    let acquisitions: u64 = per_process.iter().sum();
    let seconds = (window.end_ns - window.start_ns) as f64 / 1e9;
    let total_acquisitions = grants.len() as u64;
    let mut holds: Vec<u64> = grants
        .iter()
        .filter(|(_, g)| measured(g))
        .map(|(_, g)| g.releasing_ns.saturating_sub(g.granted_ns))
        .collect();
    let mut gaps = handoffs.gaps;
    let all_tasks: Vec<u64> = per_task.iter().flatten().copied().collect();
    FairnessRun {
        scenario: setup.scenario,
        client: asked.label(),
        asked,
        processes: reports.len(),
        tasks_per_process: setup.tasks,
        hold_ms: setup.hold.as_secs_f64() * 1e3,
        acquisitions,
        seconds,
        per_second: acquisitions as f64 / seconds,
        process_max_min: max_over_min(&per_process),
        per_process,
        task_max_min: max_over_min(&all_tasks),
        per_task,
        gap: Latency::from_nanos(&mut gaps),
        same_process_handoff: ratio(handoffs.same_process as f64, handoffs.total as f64),
        self_handoff: ratio(handoffs.same_task as f64, handoffs.total as f64),
        longest_process_run: handoffs.longest_run,
        hold: Latency::from_nanos(&mut holds),
        cost: Cost::default(),
        total_acquisitions,
        counter,
        lost_updates: total_acquisitions.saturating_sub(counter),
        exclusion_violations: violations,
        duplicate_tokens: handoffs.duplicates,
        reordered_timestamps: handoffs.reordered,
        errors,
        first_error,
    }
}

/// The largest count over the smallest; `None` when the smallest is 0 (or there are none).
pub(crate) fn max_over_min(counts: &[u64]) -> Option<f64> {
    let (min, max) = (counts.iter().min()?, counts.iter().max()?);
    (*min > 0).then(|| *max as f64 / *min as f64)
}

#[derive(Debug, Default)]
struct Handoffs {
    gaps: Vec<u64>,
    same_process: u64,
    same_task: u64,
    total: u64,
    longest_run: u64,
    duplicates: u64,
    reordered: u64,
}

/// Each measured grant after the first, in fencing-token order (`sorted`: process and grant),
/// is a handoff from the grant before it: its gap, and whether the same process (or task) won.
fn handoffs(sorted: &[(usize, FencedGrant)], measured: impl Fn(&FencedGrant) -> bool) -> Handoffs {
    let mut out = Handoffs::default();
    let mut run = 0;
    for pair in sorted.windows(2) {
        let ((p0, prev), (p1, next)) = (pair[0], pair[1]);
        if next.fence <= prev.fence {
            out.duplicates += 1;
        }
        if !measured(&next) {
            continue;
        }
        out.total += 1;
        if p0 == p1 {
            out.same_process += 1;
            run += 1;
            if prev.task == next.task {
                out.same_task += 1;
            }
        } else {
            run = 0;
        }
        out.longest_run = out.longest_run.max(run + 1);
        match next.granted_ns.checked_sub(prev.released_ns) {
            Some(gap) => out.gaps.push(gap),
            None => {
                out.reordered += 1;
                out.gaps.push(0);
            }
        }
    }
    out
}

/// One child: connects, says `ready`, hears the window, runs its tasks, reports.
pub(crate) async fn child(url: &str, params: Params) -> Result<ChildReport, String> {
    let err = |e: LockError| e.to_string();
    let locker = match params.backend {
        Backend::Redis => Locker::new(RedisLock::builder().url(url).build().map_err(err)?),
        Backend::PostgresTable => {
            Locker::new(PostgresLock::builder().url(url).build().map_err(err)?)
        }
        // S10 does not run on etcd (EtcdLock has no fair lock yet).
        Backend::Etcd => Locker::new(lock_etcd::EtcdLock::new([url]).map_err(err)?),
        // Nor on MariaDB (only the cost curves hold locks there).
        Backend::Mysql => Locker::new(lock_mysql::MysqlLock::from_url(url).map_err(err)?),
    };
    locker.ping().await.map_err(|e| e.to_string())?;
    let counter = redis::Client::open(params.counter_url.as_str())
        .map_err(|e| e.to_string())?
        .get_multiplexed_async_connection()
        .await
        .map_err(|e| e.to_string())?;
    child::say("ready");
    let window: Window = serde_json::from_str(&child::hear().await?)
        .map_err(|e| format!("bad window from the parent: {e}"))?;

    let cpu = tokio::spawn(async move {
        clock::sleep_until(window.start_ns).await;
        let cpu0 = crate::procfs::cpu_time();
        clock::sleep_until(window.end_ns).await;
        crate::procfs::cpu_time().saturating_sub(cpu0)
    });
    let name: Arc<str> = Arc::from(params.name.as_str());
    let hold = Duration::from_micros(params.hold_us);
    let keys = Arc::new((params.counter_key.clone(), params.inside_key.clone()));
    let asked = params.asked;
    let handles: Vec<_> = (0..params.tasks)
        .map(|task| {
            let (locker, name, keys) = (locker.clone(), Arc::clone(&name), Arc::clone(&keys));
            let counter = counter.clone();
            tokio::spawn(async move {
                let request = |locker: &Locker| asked.request(locker, &name);
                work(task, &locker, request, hold, counter, &keys, window.end_ns).await
            })
        })
        .collect();
    let finish =
        Duration::from_nanos(window.end_ns.saturating_sub(clock::now_ns())) + FINISH_WITHIN;
    let joined = tokio::time::timeout(finish, futures::future::join_all(handles))
        .await
        .map_err(|_| format!("child {}: tasks did not finish", params.process))?;
    let cpu = cpu.await.map_err(|e| e.to_string())?;
    let mut report = ChildReport {
        process: params.process,
        grants: Vec::new(),
        violations: 0,
        errors: 0,
        first_error: None,
        cpu_s: cpu.as_secs_f64(),
    };
    for result in joined {
        let result = result.map_err(|e| format!("a task failed: {e}"))?;
        report.grants.extend(result.grants);
        report.violations += result.violations;
        report.errors += result.errors;
        if report.first_error.is_none() {
            report.first_error = result.first_error;
        }
    }
    Ok(report)
}

#[derive(Default)]
struct TaskResult {
    grants: Vec<FencedGrant>,
    violations: u64,
    errors: u64,
    first_error: Option<String>,
}

impl TaskResult {
    fn error(&mut self, error: String) {
        self.errors += 1;
        self.first_error.get_or_insert(error);
    }
}

async fn work(
    task: usize,
    locker: &Locker,
    request: impl Fn(&Locker) -> LockRequest,
    hold: Duration,
    mut counter: MultiplexedConnection,
    (counter_key, inside_key): &(String, String),
    end_ns: u64,
) -> TaskResult {
    let mut out = TaskResult {
        grants: Vec::with_capacity(4096),
        ..TaskResult::default()
    };
    for _ in 0..MAX_ACQUISITIONS_PER_TASK {
        if clock::now_ns() >= end_ns {
            break;
        }
        let guard: Guard = match request(locker).acquire().await {
            Ok(guard) => guard,
            Err(error) => {
                out.error(error.to_string());
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let granted_ns = clock::now_ns();
        let granted = Instant::now();
        let fence = guard.fencing_token();
        // The critical section, on the counter's server: register, read, hold, write the value
        // read plus one, leave. Two holders at once would lose an increment.
        let entered: redis::RedisResult<(i64, Option<u64>)> = redis::pipe()
            .incr(inside_key, 1)
            .get(counter_key)
            .query_async(&mut counter)
            .await;
        match entered {
            Ok((inside, value)) => {
                if inside != 1 {
                    out.violations += 1;
                }
                tokio::time::sleep_until(granted + hold).await;
                let left: redis::RedisResult<()> = redis::pipe()
                    .set(counter_key, value.unwrap_or(0) + 1)
                    .ignore()
                    .decr(inside_key, 1)
                    .ignore()
                    .query_async(&mut counter)
                    .await;
                if let Err(error) = left {
                    out.error(format!("the counter: {error}"));
                }
            }
            Err(error) => {
                out.error(format!("the counter: {error}"));
                tokio::time::sleep_until(granted + hold).await;
            }
        }
        let releasing_ns = clock::now_ns();
        match guard.release().await {
            Ok(()) => {}
            Err(LockError::NotOwned { .. }) => {
                out.error("the lease was lost before release".into());
            }
            Err(error) => out.error(error.to_string()),
        }
        out.grants.push(FencedGrant {
            task,
            fence,
            granted_ns,
            releasing_ns,
            released_ns: clock::now_ns(),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handoffs_follow_the_fencing_tokens() {
        let grant = |task, fence, granted_ns, released_ns| FencedGrant {
            task,
            fence,
            granted_ns,
            releasing_ns: released_ns,
            released_ns,
        };
        // Process 0 twice (same task, then another), then process 1, whose grant reply came
        // before process 0's release reply; the first grant is outside the window.
        let sorted = [
            (0, grant(0, 10, 0, 1_000)),
            (0, grant(0, 11, 1_100, 2_100)),
            (0, grant(1, 12, 2_150, 3_000)),
            (1, grant(0, 13, 2_990, 4_000)),
        ];
        let h = handoffs(&sorted, |g| g.granted_ns >= 1_000);
        assert_eq!(h.gaps, vec![100, 50, 0]);
        assert_eq!((h.total, h.same_process, h.same_task), (3, 2, 1));
        assert_eq!((h.longest_run, h.reordered, h.duplicates), (3, 1, 0));
    }

    #[test]
    fn max_over_min_needs_a_grant_everywhere() {
        assert_eq!(max_over_min(&[285, 64, 124, 100]), Some(285.0 / 64.0));
        assert_eq!(max_over_min(&[5, 0]), None);
        assert_eq!(max_over_min(&[]), None);
    }
}
