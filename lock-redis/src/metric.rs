//! The series lock-redis records through the `metrics` facade, on top of the `Locker`'s own
//! (`lock_core::metric`, labelled `backend="redis"`): the store grace period and the memory
//! policy check.
//!
//! | series | type, unit | labels | counts |
//! |---|---|---|---|
//! | `distlock_grace_seconds` | gauge, seconds | `backend`, `server` | how long a server's grace period still lasts, as this process last checked |
//! | `distlock_grace_refused_total` | counter | `backend`, `server` | acquire attempts answered busy because their server was in its grace period |
//! | `distlock_eviction_risk_total` | counter | `backend`, `server`, `policy` | connections to a server whose memory policy can evict lock keys |
//!
//! `server` is the address the lock was built with, or the Sentinel master's name.

// The constants live next to the code that records them; these are their names here, the same
// style as `lock_core::metric`'s (no `METRIC_` prefix: the module says it).
pub use crate::grace::{
    METRIC_EVICTION_RISK_TOTAL as EVICTION_RISK_TOTAL,
    METRIC_GRACE_REFUSED_TOTAL as GRACE_REFUSED_TOTAL, METRIC_GRACE_SECONDS as GRACE_SECONDS,
};
