//! Counters through the `metrics` facade: what each node answered, and what each quorum decided.

use lock_core::{LockError, Op};
use metrics::{Unit, counter, describe_counter};

use crate::node::Node;

/// Per node and operation: the node said yes (granted, extended, released).
pub const METRIC_NODE_GRANTS: &str = "distlock_redlock_node_grants_total";
/// Per node and operation: the node said no (busy; or the key was not ours on extend/release).
pub const METRIC_NODE_REFUSALS: &str = "distlock_redlock_node_refusals_total";
/// Per node and operation: the node did not answer within the per-node timeout (or its own
/// client timed out).
pub const METRIC_NODE_TIMEOUTS: &str = "distlock_redlock_node_timeouts_total";
/// Per node and operation: the node answered with an error (connection refused, error reply).
pub const METRIC_NODE_ERRORS: &str = "distlock_redlock_node_errors_total";
/// Per operation and outcome: what the quorum decided.
pub const METRIC_QUORUM: &str = "distlock_redlock_quorum_total";

/// Registers the descriptions and units of Redlock's counters with the installed recorder.
/// Optional; call it once after installing the recorder (exporters show them as `# HELP`).
///
/// | counter | labels | counts |
/// |---|---|---|
/// | `distlock_redlock_node_grants_total` | `node`, `op` | a node said yes |
/// | `distlock_redlock_node_refusals_total` | `node`, `op` | a node said no (busy / not ours) |
/// | `distlock_redlock_node_timeouts_total` | `node`, `op` | a node did not answer in time |
/// | `distlock_redlock_node_errors_total` | `node`, `op` | a node answered with an error |
/// | `distlock_redlock_quorum_total` | `op`, `outcome` | what a round decided |
///
/// `op` is `acquire`, `extend` or `release` (releases include the cleanup of failed
/// acquires); `outcome` is one of `acquired`, `busy`, `no_quorum`, `validity_expired`,
/// `invalid`, `cancelled` (acquire), `extended`, `not_owned` (extend, release), `released`
/// (release).
pub fn describe_metrics() {
    describe_counter!(
        METRIC_NODE_GRANTS,
        Unit::Count,
        "Redlock node answers: yes (granted, extended, released)"
    );
    describe_counter!(
        METRIC_NODE_REFUSALS,
        Unit::Count,
        "Redlock node answers: no (busy, or not ours)"
    );
    describe_counter!(
        METRIC_NODE_TIMEOUTS,
        Unit::Count,
        "Redlock node operations that timed out"
    );
    describe_counter!(
        METRIC_NODE_ERRORS,
        Unit::Count,
        "Redlock node operations that failed with an error"
    );
    describe_counter!(METRIC_QUORUM, Unit::Count, "Redlock round outcomes");
}

/// The `op` label.
pub(crate) fn op_label(op: Op) -> &'static str {
    match op {
        Op::Acquire => "acquire",
        Op::Extend => "extend",
        Op::Release => "release",
        Op::Connect => "connect",
        _ => "other",
    }
}

/// What one node answered.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Reply {
    Yes,
    No,
}

/// Counts one node's answer to `op`.
pub(crate) fn node_answer(node: &Node, op: Op, answer: Result<Reply, &LockError>) {
    let name = match answer {
        Ok(Reply::Yes) => METRIC_NODE_GRANTS,
        Ok(Reply::No) => METRIC_NODE_REFUSALS,
        Err(LockError::Timeout { .. }) => METRIC_NODE_TIMEOUTS,
        Err(_) => METRIC_NODE_ERRORS,
    };
    counter!(name, "node" => node.label.clone(), "op" => op_label(op)).increment(1);
}

/// Counts one round's outcome.
pub(crate) fn quorum_outcome(op: Op, outcome: &'static str) {
    counter!(METRIC_QUORUM, "op" => op_label(op), "outcome" => outcome).increment(1);
}
