//! The Redis backend (feature `redis`): [`RedisLock`] on Redis or Valkey — one server, and with
//! features `cluster` / `sentinel` / `tls` a Cluster, the master Sentinel names, TLS — with
//! everything lock-redis exports: its defaults, key layout, store grace period, errors, metric
//! names ([`metric`]), and the client crates it is built on ([`redis`](mod@redis),
//! [`deadpool_redis`]) under their own names.

// Every name of lock-redis resolves here through this glob, also one added or renamed there before
// the list below names it; hidden, because rustdoc would copy the client crates' whole
// documentation into this module's through a glob.
// While the list names everything, the glob brings nothing of its own: hence the allow.
#[doc(hidden)]
#[allow(unused_imports, unreachable_pub)]
pub use lock_redis::*;

// The documented list: every public name of lock-redis (the facade's `exports` test checks it
// against lock-redis's lib.rs). Plain comments, not doc comments: a doc comment on a `pub use` is
// prepended to every re-exported item's own documentation.
pub use lock_redis::{
    BACKEND, DEFAULT_CONNECT_TIMEOUT, DEFAULT_FENCE_RETENTION, DEFAULT_GRACE,
    DEFAULT_OPERATION_TIMEOUT, DEFAULT_SUBSCRIBER_PING_INTERVAL, DEFAULT_TRACK_LOSSES_AFTER,
    DerivedKey, EvictionRisk, FencedScript, HolderReplies, LIBRARY_VERSION, LibraryLoad, LockError,
    LockKeys, MAX_NOTE_BYTES, NotRedis, NotReplicated, RECORD_SUFFIX, RedisFences, RedisLock,
    RedisLockBuilder, ReplicaPolicy, TOKEN_PREFIX, TokenValue, Topology, key_slot, metric,
    token_value,
};
// A Redis Cluster's refresh interval (feature `cluster`).
#[cfg(feature = "cluster")]
#[cfg_attr(docsrs, doc(cfg(feature = "cluster")))]
pub use lock_redis::CLUSTER_GRACE_REFRESH;
// The client crates the backend is built on, under their own names: links to their own
// documentation.
#[doc(no_inline)]
pub use lock_redis::{deadpool_redis, redis};
