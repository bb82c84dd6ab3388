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

/// The `Locker`'s own series, which every backend records: lock-core's names, here too so
/// that `metric` is one module per backend crate.
pub use lock_core::metric::*;

/// Gauge, seconds: how long the grace period of a server still lasts, as this process last
/// checked (on each acquire attempt there; 0 at the first attempt after it ended). Labels
/// `backend` (`"redis"`) and `server` (the address the lock was built with, or the Sentinel
/// master's name).
pub const GRACE_SECONDS: &str = "distlock_grace_seconds";

/// Counter: acquire attempts answered busy because their server was in its grace period.
/// Labels `backend` and `server`, as [`GRACE_SECONDS`].
pub const GRACE_REFUSED_TOTAL: &str = "distlock_grace_refused_total";

/// Counter: connections to a server whose memory policy can evict lock keys (a `maxmemory`
/// and an `allkeys-*` or `volatile-*` policy): one per new connection. Labels `backend`,
/// `server` and `policy`.
pub const EVICTION_RISK_TOTAL: &str = "distlock_eviction_risk_total";
