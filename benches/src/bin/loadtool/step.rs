//! A step of the run: a future run to its end on the tool's runtime, within its planned time
//! plus a slack, and a client's label as part of the key names the step uses.

use std::future::Future;
use std::time::Duration;

use tokio::runtime::Runtime;

/// Slack on top of a step's planned time before it is abandoned as hung.
pub(crate) const STEP_SLACK: Duration = Duration::from_secs(60);

/// Runs `future` on `runtime`, abandoning it past `planned` plus [`STEP_SLACK`].
pub(crate) fn block<F: Future>(
    runtime: &Runtime,
    planned: Duration,
    future: F,
) -> Result<F::Output, String> {
    let limit = planned + STEP_SLACK;
    runtime
        .block_on(async { tokio::time::timeout(limit, future).await })
        .map_err(|_| format!("a step took longer than {limit:?}; abandoned"))
}

/// A label as part of a key name: `distlock, fixed ttl` → `distlock-fixed-ttl`.
pub(crate) fn slug(label: &str) -> String {
    label
        .chars()
        .filter(|c| *c != ',')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}
