//! S1, S2 and S4: tasks that each take and release their own lock, as fast as they can.

use std::sync::Arc;
use std::time::Duration;

use distlock_bench::HandLock;
use lock_core::backend::{Attempt, Lock};
use lock_core::{DEFAULT_LEASE, Locker, Token};
use serde::Serialize;
use tokio::time::Instant;

use crate::info::{Cost, Delta, Probe};
use crate::stats::{Latency, nanos};
use crate::window::{Phase, Timing};

/// The TTL of the hand-written lock and of bare backend calls: the `Locker`'s default lease,
/// so every client asks the server for the same thing.
pub(crate) const TTL: Duration = DEFAULT_LEASE;

/// No task runs more cycles than this, whatever the clock says.
const MAX_CYCLES_PER_TASK: u64 = 50_000_000;

/// How long the tasks may take to notice the end of a run and finish their cycle.
const FINISH_WITHIN: Duration = Duration::from_secs(10);

/// Who takes the locks.
#[derive(Clone)]
pub(crate) enum Client {
    /// distlock as users call it: `locker.lock(name).try_acquire()`, then `guard.release()`;
    /// with the default (renewed) lease, or with a fixed TTL (`.fixed_ttl(..)`, no renewal) when
    /// one is given.
    Locker(Locker, Option<Duration>),
    /// The backend alone (`Lock::try_acquire` + `Lock::release`), without the `Locker`: what
    /// the policy layer costs is the difference.
    Backend(Arc<dyn Lock>),
    /// The hand-written baseline.
    Hand(HandLock),
    /// The hand-written fenced baseline.
    HandFenced(distlock_bench::HandFencedLock),
    /// rslock's `LockManager` (one server, or a Redlock's nodes).
    Rslock(rslock::LockManager),
    /// E1's baseline: etcd's transactions sent alone with etcd-client (see [`crate::etcd`]).
    EtcdBare(Box<crate::etcd_bare::BareEtcd>),
    /// M1's and M2's baseline: the hand-written MySQL lease-table lock.
    HandMysql(distlock_bench::HandMysqlLock),
    /// O1's and O2's baseline: the hand-written object-storage lock (create + delete).
    HandS3(distlock_bench::HandS3Lock),
    /// O1's and O2's second baseline: the same conditional updates as `ObjectStoreLock`, bare.
    BareS3(distlock_bench::BareS3Updates),
}

impl Client {
    /// One acquire + release of the free lock `name`.
    pub(crate) async fn cycle(&self, name: &Arc<str>) -> Result<(), String> {
        match self {
            Self::Locker(locker, ttl) => {
                let mut request = locker.lock(Arc::clone(name));
                if let Some(ttl) = ttl {
                    request = request.fixed_ttl(*ttl);
                }
                let guard = request
                    .try_acquire()
                    .await
                    .map_err(|e| e.to_string())?
                    .ok_or("the lock was busy")?;
                guard.release().await.map_err(|e| e.to_string())?;
            }
            Self::Backend(lock) => {
                let token = Token::generate().map_err(|e| e.to_string())?;
                match lock
                    .try_acquire(name, token, TTL)
                    .await
                    .map_err(|e| e.to_string())?
                {
                    Attempt::Acquired(lease) => {
                        lock.release(&lease).await.map_err(|e| e.to_string())?;
                    }
                    Attempt::Busy { .. } => return Err("the lock was busy".into()),
                }
            }
            Self::Hand(hand) => {
                let token = hand
                    .try_acquire(name, TTL)
                    .await
                    .map_err(|e| e.to_string())?
                    .ok_or("the lock was busy")?;
                hand.release(name, &token)
                    .await
                    .map_err(|e| e.to_string())?;
            }
            Self::HandFenced(hand) => {
                let (token, _fence) = hand
                    .try_acquire(name, TTL)
                    .await
                    .map_err(|e| e.to_string())?
                    .ok_or("the lock was busy")?;
                hand.release(name, &token)
                    .await
                    .map_err(|e| e.to_string())?;
            }
            Self::Rslock(manager) => crate::rslock::cycle(manager, name, TTL).await?,
            Self::EtcdBare(bare) => bare.cycle(name).await?,
            Self::HandMysql(hand) => {
                let token = hand
                    .try_acquire(name, TTL)
                    .await
                    .map_err(|e| e.to_string())?
                    .ok_or("the lock was busy")?;
                hand.release(name, &token)
                    .await
                    .map_err(|e| e.to_string())?;
            }
            Self::HandS3(hand) => {
                hand.try_acquire(name).await?.ok_or("the lock was busy")?;
                hand.release(name).await?;
            }
            Self::BareS3(bare) => bare.cycle(name).await?,
        }
        Ok(())
    }
}

/// The result of one client in S1, S2 or S4.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct CycleRun {
    pub(crate) scenario: &'static str,
    pub(crate) client: String,
    /// Concurrent tasks, each with its own lock name.
    pub(crate) tasks: usize,
    /// Acquire + release cycles completed in the measured window.
    pub(crate) cycles: u64,
    pub(crate) seconds: f64,
    pub(crate) per_second: f64,
    /// Latency of one whole cycle (acquire + release).
    pub(crate) latency: Latency,
    /// Server commands, client and server CPU per cycle.
    pub(crate) cost: Cost,
    pub(crate) errors: u64,
    pub(crate) first_error: Option<String>,
}

/// What one task brings back.
struct TaskResult {
    samples: Vec<u64>,
    errors: u64,
    first_error: Option<String>,
}

/// One measured window of one client, before it is summarised; windows of several rounds
/// are summarised together.
pub(crate) struct Window {
    samples: Vec<u64>,
    delta: Delta,
    seconds: f64,
    errors: u64,
    first_error: Option<String>,
}

impl Window {
    /// Cycles per second measured in this window.
    pub(crate) fn per_second(&self) -> f64 {
        crate::stats::ratio(self.samples.len() as f64, self.seconds)
    }

    /// Cycles that failed in this window.
    pub(crate) fn errors(&self) -> u64 {
        self.errors
    }
}

impl CycleRun {
    /// The summary of the windows of one client.
    pub(crate) fn from_windows(
        scenario: &'static str,
        client: &str,
        tasks: usize,
        windows: Vec<Window>,
    ) -> Self {
        let mut samples = Vec::new();
        let mut delta = Delta::default();
        let (mut seconds, mut errors, mut first_error) = (0.0, 0, None);
        for w in windows {
            samples.extend(w.samples);
            delta.add(&w.delta);
            seconds += w.seconds;
            errors += w.errors;
            first_error = first_error.or(w.first_error);
        }
        let cycles = samples.len() as u64;
        Self {
            scenario,
            client: client.to_owned(),
            tasks,
            cycles,
            seconds,
            per_second: crate::stats::ratio(cycles as f64, seconds),
            latency: Latency::from_nanos(&mut samples),
            cost: delta.cost(cycles),
            errors,
            first_error,
        }
    }
}

/// Runs `client` on `tasks` tasks, task `i` cycling on its own name `prefix:i`, for
/// `timing.warmup` unmeasured and then `timing.measure` measured; summarised.
pub(crate) async fn run(
    scenario: &'static str,
    label: &str,
    client: Client,
    prefix: &str,
    tasks: usize,
    timing: Timing,
    probe: &mut Probe,
) -> Result<CycleRun, String> {
    let window = measure(label, client, prefix, tasks, timing, probe).await?;
    Ok(CycleRun::from_windows(scenario, label, tasks, vec![window]))
}

/// One measured window of [`run`].
pub(crate) async fn measure(
    label: &str,
    client: Client,
    prefix: &str,
    tasks: usize,
    timing: Timing,
    probe: &mut Probe,
) -> Result<Window, String> {
    let measured = crate::window::measure(
        label,
        tasks,
        |i, phase| {
            let name: Arc<str> = Arc::from(format!("{prefix}:{i}"));
            let client = client.clone();
            async move { task(&client, &name, &phase).await }
        },
        timing,
        FINISH_WITHIN,
        probe,
    )
    .await?;
    let mut window = Window {
        samples: Vec::new(),
        delta: measured.delta,
        seconds: measured.seconds,
        errors: 0,
        first_error: None,
    };
    for result in measured.results {
        window.samples.extend(result.samples);
        window.errors += result.errors;
        window.first_error = window.first_error.or(result.first_error);
    }
    Ok(window)
}

async fn task(client: &Client, name: &Arc<str>, phase: &Phase) -> TaskResult {
    let mut out = TaskResult {
        samples: Vec::with_capacity(65_536),
        errors: 0,
        first_error: None,
    };
    for _ in 0..MAX_CYCLES_PER_TASK {
        if phase.stopped() {
            break;
        }
        let measuring = phase.measuring();
        let started = Instant::now();
        match client.cycle(name).await {
            Ok(()) if measuring => out.samples.push(nanos(started.elapsed())),
            Ok(()) => {}
            Err(error) => {
                out.errors += 1;
                out.first_error.get_or_insert(error);
                // A failing server must not turn this into a busy loop.
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
    out
}
