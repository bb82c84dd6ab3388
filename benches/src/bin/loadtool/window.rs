//! The measured window of the contended scenarios (S3, S7, S8): tasks start and warm up, the
//! server's counters are read, the tasks are told to count for the window, then to stop, and
//! the counters are read again once every task has finished.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use serde::Serialize;
use tokio::time::Instant;

use crate::info::{Delta, Probe};

const WARMUP: u8 = 0;
const MEASURE: u8 = 1;
const STOP: u8 = 2;

/// How long a measured run warms up, then measures.
#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct Timing {
    #[serde(serialize_with = "crate::stats::secs")]
    pub(crate) warmup: Duration,
    #[serde(serialize_with = "crate::stats::secs")]
    pub(crate) measure: Duration,
}

/// Where a run is: warming up, measuring, or stopping. Shared by the tasks of one run.
#[derive(Debug)]
pub(crate) struct Phase(AtomicU8);

impl Phase {
    fn new() -> Self {
        Self(AtomicU8::new(WARMUP))
    }

    /// Whether work started now counts.
    pub(crate) fn measuring(&self) -> bool {
        self.0.load(Ordering::Acquire) == MEASURE
    }

    /// Whether the tasks should finish.
    pub(crate) fn stopped(&self) -> bool {
        self.0.load(Ordering::Acquire) == STOP
    }

    fn set(&self, phase: u8) {
        self.0.store(phase, Ordering::Release);
    }
}

/// What the tasks of one window brought back, and what the server did meanwhile.
pub(crate) struct Measured<T> {
    /// One result per task, in the order they were started.
    pub(crate) results: Vec<T>,
    /// The measured window's length.
    pub(crate) seconds: f64,
    /// The server's counters and the CPU times over the window (and the tasks' last
    /// operations after it).
    pub(crate) delta: Delta,
}

/// Starts `tasks` tasks (`task(i, phase)`), lets them warm up for `timing.warmup`, measures
/// for `timing.measure`, then stops them and waits up to `finish_within` for them to end.
/// `label` names the run in errors.
pub(crate) async fn measure<T, F, Fut>(
    label: &str,
    tasks: usize,
    mut task: F,
    timing: Timing,
    finish_within: Duration,
    probe: &mut Probe,
) -> Result<Measured<T>, String>
where
    F: FnMut(usize, Arc<Phase>) -> Fut,
    Fut: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let phase = Arc::new(Phase::new());
    let handles: Vec<_> = (0..tasks)
        .map(|i| tokio::spawn(task(i, Arc::clone(&phase))))
        .collect();
    tokio::time::sleep(timing.warmup).await;
    let before = probe.snapshot().await.map_err(|e| e.to_string())?;
    let started = Instant::now();
    phase.set(MEASURE);
    tokio::time::sleep(timing.measure).await;
    phase.set(STOP);
    let seconds = started.elapsed().as_secs_f64();
    let joined = tokio::time::timeout(finish_within, futures::future::join_all(handles))
        .await
        .map_err(|_| format!("{label}: tasks did not finish within {finish_within:?}"))?;
    let after = probe.snapshot().await.map_err(|e| e.to_string())?;
    let results = joined
        .into_iter()
        .map(|r| r.map_err(|e| format!("{label}: a task failed: {e}")))
        .collect::<Result<_, _>>()?;
    Ok(Measured {
        results,
        seconds,
        delta: before.until(&after),
    })
}
