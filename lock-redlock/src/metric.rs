//! The series Redlock records through the `metrics` facade, on top of the `Locker`'s own
//! (`lock_core::metric`, labelled `backend="redlock"`): each node's answers and each round's
//! outcome.
//!
//! | series | type | labels | counts |
//! |---|---|---|---|
//! | `distlock_redlock_node_grants_total` | counter | `node`, `op` | a node said yes (granted, extended, released; `op="repair"`: a key the node had lost was set again; `op="describe"`: the node has a holder; `op="annotate"`: the note was written) |
//! | `distlock_redlock_node_refusals_total` | counter | `node`, `op` | a node said no (busy, or the key was not ours; `op="describe"`: the node has no holder) |
//! | `distlock_redlock_node_timeouts_total` | counter | `node`, `op` | a node did not answer within the per-node timeout |
//! | `distlock_redlock_node_errors_total` | counter | `node`, `op` | a node answered with an error |
//! | `distlock_redlock_quorum_total` | counter | `op`, `outcome` | what a round decided |
//!
//! [`describe`] registers their descriptions with the installed recorder.

/// The `Locker`'s own series, which every backend records: lock-core's names, here too so
/// that `metric` is one module per backend crate.
pub use lock_core::metric::*;

// The constants live next to the code that records them; these are their names here, the same
// style as `lock_core::metric`'s (no `METRIC_` prefix: the module says it).
pub use crate::telemetry::{
    METRIC_NODE_ERRORS as NODE_ERRORS, METRIC_NODE_GRANTS as NODE_GRANTS,
    METRIC_NODE_REFUSALS as NODE_REFUSALS, METRIC_NODE_TIMEOUTS as NODE_TIMEOUTS,
    METRIC_QUORUM as QUORUM, describe_metrics as describe,
};
