//! The clients' labels, as the run's JSON and the report name them: a leaf, so that every part
//! that measures a client and the run that records it can name it without importing each other.

/// distlock through its `Locker`, as users call it.
pub(crate) const DISTLOCK: &str = "distlock";
/// distlock through its `Locker` with a fixed TTL (`.fixed_ttl(..)`: no renewal).
pub(crate) const DISTLOCK_TTL: &str = "distlock, fixed ttl";
/// distlock through its `Locker` on a `RedisLock` built with `fencing(false)`: a grant is one
/// plain `SET NX PX GET`, like the hand-written lock's.
pub(crate) const UNFENCED: &str = "distlock, no fencing";
/// `RedisLock` called directly, without the `Locker`.
pub(crate) const BACKEND: &str = "distlock backend only";
/// The hand-written redis-rs lock.
pub(crate) const HAND: &str = "hand-written";
/// The hand-written redis-rs lock with a fencing token (one grant script; issue 51): what
/// distlock's fenced lock is compared with.
pub(crate) const HAND_FENCED: &str = "hand-written fenced";
/// rslock 0.10's `LockManager`.
pub(crate) const RSLOCK: &str = "rslock";

/// S4's label of distlock's Redlock over `nodes` servers.
pub(crate) fn redlock_label(nodes: usize) -> String {
    format!("Redlock, {nodes} nodes")
}

/// S4's label of distlock's Redlock over `nodes` servers built with `fencing(false)`: a node's
/// grant is one plain `SET NX PX GET`, as rslock's is.
pub(crate) fn redlock_unfenced_label(nodes: usize) -> String {
    format!("Redlock, no fencing, {nodes} nodes")
}

/// S4's label of rslock over `nodes` servers.
pub(crate) fn rslock_label(nodes: usize) -> String {
    format!("{RSLOCK}, {nodes} nodes")
}
