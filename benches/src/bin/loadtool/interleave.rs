//! The interleaved rounds of a backend's S1/S2 against its baselines (M1/M2 on MariaDB, O1/O2
//! on object storage, S4's Redlock against rslock): in each round the hand-written lock first, then the backend alone, then
//! distlock, so that a slow patch of a shared machine weighs on all three alike.

use tokio::runtime::Runtime;

use crate::cli::Plan;
use crate::cycles::{self, Client, CycleRun};
use crate::info::Probe;
use crate::progress::Progress;
use crate::step::{block, slug};
use crate::window::Timing;

/// One part's rounds: its name, its tasks, and how its clients are labelled.
pub(crate) struct Part<'a> {
    /// `"M1"`, `"O2"`, ...
    pub(crate) scenario: &'static str,
    /// Concurrent tasks, each on a name of its own.
    pub(crate) tasks: usize,
    /// The clients' labels, distlock first, the hand-written lock (the baseline) last (as
    /// `clients`).
    pub(crate) labels: &'a [&'a str],
    /// Between the scenario and the client in the lock names (`:` or `-`, what the store takes).
    pub(crate) separator: &'a str,
}

/// S1's rounds over `clients` (in `part.labels`' order), run last to first in each round.
pub(crate) fn rounds(
    part: &Part<'_>,
    plan: &Plan,
    runtime: &Runtime,
    progress: &mut Progress,
    clients: &[Client],
    probe: &mut Probe,
) -> Result<Vec<CycleRun>, String> {
    let timing = Timing {
        warmup: plan.cycles.warmup / plan.s1_rounds,
        measure: plan.cycles.measure / plan.s1_rounds,
    };
    let mut windows: Vec<Vec<cycles::Window>> = part.labels.iter().map(|_| Vec::new()).collect();
    for _ in 0..plan.s1_rounds {
        for i in (0..part.labels.len()).rev() {
            progress.next();
            let label = part.labels[i];
            windows[i].push(block(
                runtime,
                timing.warmup + timing.measure,
                cycles::measure(
                    label,
                    clients[i].clone(),
                    &format!(
                        "{}{}{}",
                        part.scenario.to_lowercase(),
                        part.separator,
                        slug(label)
                    ),
                    part.tasks,
                    timing,
                    probe,
                ),
            )??);
        }
    }
    Ok(part
        .labels
        .iter()
        .zip(windows)
        .map(|(label, w)| CycleRun::from_windows(part.scenario, label, part.tasks, w))
        .collect())
}
