//! The settings of a [`Redlock`](crate::Redlock) and their defaults: the per-node timeout and
//! the clock-drift allowance. The builder (`config.rs`) sets them; the rounds read them.

use std::time::Duration;

/// The default drift factor: the drift allowance is 1 % of the TTL (plus
/// [`DEFAULT_DRIFT_CONSTANT`]), as on the Redis distributed-locks page.
pub const DEFAULT_DRIFT_FACTOR: f64 = 0.01;

/// The default constant part of the drift allowance: 2 ms, for the resolution of the nodes'
/// millisecond TTLs and timer slack.
pub const DEFAULT_DRIFT_CONSTANT: Duration = Duration::from_millis(2);

/// The default per-node timeout is this share of the TTL, in per cent (2 %: 200 ms for a 10 s
/// TTL), at least [`NODE_TIMEOUT_FLOOR`] and at most [`NODE_TIMEOUT_CEILING`]; see
/// [`default_node_timeout`].
pub const NODE_TIMEOUT_PERCENT: u32 = 2;

/// The shortest default per-node timeout: 50 ms. Below that a node that is merely busy, or a
/// connection being (re)established, would count as down; a hung node costs at most this much
/// before the outcome is known, and only when the outcome needs it.
pub const NODE_TIMEOUT_FLOOR: Duration = Duration::from_millis(50);

/// The longest default per-node timeout: 500 ms. A node that has not answered a lock command in
/// half a second is, for a lock, down. Also the bound of each node's release (whose TTL is not
/// known). Below `RedisLock`'s default command timeout (1 s) on purpose: the Redlock's timeout
/// fires first, so the node keeps its connection and requests to a hung node stay in order on
/// it (see "Operating it" in the crate docs).
pub const NODE_TIMEOUT_CEILING: Duration = Duration::from_millis(500);

/// The default per-node timeout for an acquire or extend with `ttl`: [`NODE_TIMEOUT_PERCENT`] of
/// it, at least [`NODE_TIMEOUT_FLOOR`] and at most [`NODE_TIMEOUT_CEILING`].
///
/// Whatever the configuration, a node's attempt is also cut off when the lease could no longer
/// be valid (at `ttl − drift`), since a later answer could not make it so.
///
/// ```
/// use std::time::Duration;
/// use lock_redlock::default_node_timeout;
///
/// assert_eq!(default_node_timeout(Duration::from_secs(10)), Duration::from_millis(200));
/// assert_eq!(default_node_timeout(Duration::from_secs(1)), Duration::from_millis(50));
/// assert_eq!(default_node_timeout(Duration::from_secs(3600)), Duration::from_millis(500));
/// ```
#[must_use]
pub fn default_node_timeout(ttl: Duration) -> Duration {
    (ttl / 100 * NODE_TIMEOUT_PERCENT).clamp(NODE_TIMEOUT_FLOOR, NODE_TIMEOUT_CEILING)
}

/// The settings a [`Redlock`](crate::Redlock) keeps.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Config {
    /// A fixed per-node timeout, or `None` for [`default_node_timeout`].
    pub(crate) node_timeout: Option<Duration>,
    pub(crate) drift_factor: f64,
    pub(crate) drift_constant: Duration,
}
