//! Counters through the `metrics` facade: what each node answered, and what each quorum decided.

use std::sync::Arc;

use lock_core::{LockError, Op};
use metrics::{Key, Label, Level, Metadata, Unit, counter, describe_counter};

/// Per node and operation: the node said yes (granted, extended, released; with
/// `op="repair"`: a key the node had lost was set again with the lease's token).
pub const METRIC_NODE_GRANTS: &str = "distlock_redlock_node_grants_total";
/// Per node and operation: the node said no (busy; or the key was not ours on extend/release;
/// with `op="repair"`: the key is held by another token, or the node grants nothing now).
pub const METRIC_NODE_REFUSALS: &str = "distlock_redlock_node_refusals_total";
/// Per node and operation: the node did not answer within the per-node timeout (or its own
/// client timed out).
pub const METRIC_NODE_TIMEOUTS: &str = "distlock_redlock_node_timeouts_total";
/// Per node and operation: the node answered with an error (connection refused, error reply).
pub const METRIC_NODE_ERRORS: &str = "distlock_redlock_node_errors_total";
/// Per operation and outcome: what the quorum decided.
pub const METRIC_QUORUM: &str = "distlock_redlock_quorum_total";

static METADATA: Metadata<'static> =
    Metadata::new(module_path!(), Level::INFO, Some(module_path!()));

/// The node counters, in the order of [`NodeKeys`]' rows.
const NODE_METRICS: [&str; 4] = [
    METRIC_NODE_GRANTS,
    METRIC_NODE_REFUSALS,
    METRIC_NODE_TIMEOUTS,
    METRIC_NODE_ERRORS,
];

/// The `op` labels, in the order of [`NodeKeys`]' columns (see [`column`]). `repair`,
/// `describe` and `annotate` have no [`Op`] of their own: they are counted through [`REPAIR`],
/// [`DESCRIBE`] and [`ANNOTATE`].
const OP_LABELS: [&str; 8] = [
    "acquire", "extend", "release", "connect", "other", "repair", "describe", "annotate",
];

/// The column of the `repair` label: the `SET NX` with the lease's own token that a quorum
/// extend sends to a node that no longer held the key (see `crate::repair`).
pub(crate) const REPAIR: usize = 5;
/// The column of the `describe` label: a node's read of the holder (`describe_holder`); yes
/// when the node has a holder, no when it has none.
pub(crate) const DESCRIBE: usize = 6;
/// The column of the `annotate` label: a node's write of the holder's note; yes when written,
/// no when the lease was not ours there.
pub(crate) const ANNOTATE: usize = 7;

/// One node's counter keys, built once with the node: counting an answer then only looks its
/// key up and registers it with the recorder installed at that moment (so a recorder installed
/// after the `Redlock` was built still sees every answer), instead of building the key and its
/// labels anew for every answer.
pub(crate) struct NodeKeys([[Key; OP_LABELS.len()]; NODE_METRICS.len()]);

impl NodeKeys {
    pub(crate) fn new(label: &Arc<str>) -> Self {
        Self(NODE_METRICS.map(|name| {
            OP_LABELS.map(|op| {
                let labels = vec![
                    Label::new("node", label.to_string()),
                    Label::from_static_parts("op", op),
                ];
                Key::from_parts(name, labels)
            })
        }))
    }
}

/// The column of `op` in [`OP_LABELS`].
pub(crate) fn column(op: Op) -> usize {
    match op {
        Op::Acquire => 0,
        Op::Extend => 1,
        Op::Release => 2,
        Op::Connect => 3,
        _ => 4,
    }
}

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
/// `op` is `acquire`, `extend`, `release` (releases include the cleanup of failed
/// acquires), `repair` (after a quorum extend, a node that no longer held the key is sent
/// the lease's token again with `SET NX`: a grant is a repaired node, a refusal a node where
/// another token holds the key or that grants nothing now), `describe` (a node's read of the
/// holder: yes when it has one, no when it has none) or `annotate` (a node's write of the
/// holder's note: yes when written, no when the lease was not ours there); `outcome` is one
/// of `acquired`, `busy`, `no_quorum`, `validity_expired`, `invalid`, `cancelled` (acquire),
/// `extended`, `not_owned` (extend, release, annotate), `released` (release), `written`
/// (annotate), `held` (a grant named by a quorum), `unnamed` (keys on enough nodes to be busy,
/// no grant named by a quorum), `nobody` (describe; `no_quorum` too).
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

/// The `op` label of `column` (see [`OP_LABELS`]).
pub(crate) fn op_label_of(column: usize) -> &'static str {
    OP_LABELS[column]
}

/// What one node answered.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Reply {
    Yes,
    No,
}

/// Counts one node's answer to `op`, under that node's `keys`.
pub(crate) fn node_answer(keys: &NodeKeys, op: Op, answer: Result<Reply, &LockError>) {
    node_answer_in(keys, column(op), answer);
}

/// Counts one node's answer in the `op` column `column` (see [`OP_LABELS`]).
pub(crate) fn node_answer_in(keys: &NodeKeys, column: usize, answer: Result<Reply, &LockError>) {
    let row = match answer {
        Ok(Reply::Yes) => 0,
        Ok(Reply::No) => 1,
        Err(LockError::Timeout { .. }) => 2,
        Err(_) => 3,
    };
    let key = &keys.0[row][column];
    metrics::with_recorder(|r| r.register_counter(key, &METADATA)).increment(1);
}

/// Counts one round's outcome.
pub(crate) fn quorum_outcome(op: Op, outcome: &'static str) {
    quorum_outcome_in(column(op), outcome);
}

/// Counts one round's outcome under the `op` label of `column` (see [`OP_LABELS`]).
pub(crate) fn quorum_outcome_in(column: usize, outcome: &'static str) {
    counter!(METRIC_QUORUM, "op" => OP_LABELS[column], "outcome" => outcome).increment(1);
}
