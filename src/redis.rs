//! The Redis backend (feature `redis`): [`RedisLock`] on one server, and with features
//! `cluster` / `sentinel` / `tls` on those topologies; its defaults, its key layout, and the
//! redis client it is built on, as [`client`].
//!
//! The lock type and its builder are also at the crate root ([`crate::RedisLock`]); the
//! settings and helpers keep their own names here (`distlock::redis::DEFAULT_CONNECT_TIMEOUT`),
//! as `sqlx::postgres` does.

// Plain comments, not doc comments: a doc comment on a `pub use` is prepended to every
// re-exported item's own documentation.
pub use lock_redis::{
    DEFAULT_COMMAND_TIMEOUT, DEFAULT_CONNECT_TIMEOUT, DEFAULT_FENCE_RETENTION, DerivedKey,
    LockKeys, MAX_NOTE_BYTES, NotReplicated, RedisLock, RedisLockBuilder, ReplicaPolicy,
    TOKEN_PREFIX, TokenValue, Topology, key_slot, token_value,
};
// The release subscriber's liveness check (a ping on the subscription connection).
pub use lock_redis::DEFAULT_SUBSCRIBER_PING_INTERVAL;

// The redis crate (redis-rs) the backend is built on, one version with deadpool-redis: use it
// for your own commands on the same server.
#[doc(no_inline)]
pub use lock_redis::redis as client;

// `distlock::redis` was the redis crate itself until this module took its name: its items stay
// reachable here (`distlock::redis::Client`, `distlock::redis::cmd`) for one release. The names
// above are not in the redis crate, so nothing is shadowed.
#[doc(hidden)]
pub use lock_redis::redis::*;
