#![doc = include_str!("docs/crate.md")]
#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]

// The repository README is no longer the crate's front page (that is `docs/crate.md`); its
// examples still compile as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

pub use lock_core::{
    Backoff, BoxError, DEFAULT_LEASE, DEFAULT_RETRY_ERRORS_FOR, DEFAULT_WAIT, FAIR_ENTRY_TTL,
    Guard, Kind, Lease, LeaseWatch, LockError, LockRequest, Locker, LockerBuilder, MAX_MULTI,
    MAX_NAME_LEN, MAX_PERMITS, MAX_TTL, MIN_TTL, MemoryLock, MultiGuard, MultiRequest, Op,
    ParseTokenError, TimeoutPhase, Token, TokenHex, check_name, check_ttl, fair_entry_ttl, metric,
    valid_until,
};
// Leader election, the stop margin and adopting a kept lease (lock-core).
pub use lock_core::{
    AdoptRequest, DEFAULT_OBSERVE_POLL, Election, ElectionRun, Leader, Leadership, ParseLeaseError,
    TermEnd, TermEvent, default_stop_margin,
};

// What a backend implements and uses (the `Lock` trait, attempts, release signals): users of a
// lock need none of it, so it has a module of its own.
pub use lock_core::backend;
// Their crate-root paths from before, for one release.
#[doc(hidden)]
pub use lock_core::backend::{
    Attempt, Handover, Lock, MultiAttempt, ReleaseSignal, ReleaseWatch, acquire_in_order,
};

// One module per backend, as in sqlx: its settings and helpers under their own names
// (`distlock::postgres::DEFAULT_POOL_SIZE`). The types are also here at the root, the ones a
// service names when it builds a locker or matches an error.
#[cfg(feature = "etcd")]
#[cfg_attr(docsrs, doc(cfg(feature = "etcd")))]
pub mod etcd;
#[cfg(feature = "postgres")]
#[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
pub mod postgres;
#[cfg(feature = "redis")]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
pub mod redis;
#[cfg(feature = "redlock")]
#[cfg_attr(docsrs, doc(cfg(feature = "redlock")))]
pub mod redlock;

// The Redis backend: one server, and with features `cluster` / `sentinel` / `tls` those
// topologies (feature `redis`, on by default). Plain comments, not doc comments: a doc comment
// on a `pub use` is prepended to every re-exported item's own documentation.
#[cfg(feature = "redis")]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
pub use lock_redis::{
    DEFAULT_GRACE, EvictionRisk, NotReplicated, RedisLock, RedisLockBuilder, ReplicaPolicy,
    TokenValue, deadpool_redis,
};

// The PostgreSQL backend: a lease table, releases announced with LISTEN/NOTIFY, and its opt-in
// advisory mode, session advisory locks with sqlx's keys (feature `postgres`).
#[cfg(feature = "postgres")]
#[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
pub use lock_postgres::{
    MissingTable, PostgresAdvisoryLock, PostgresAdvisoryLockBuilder, PostgresError, PostgresLock,
    PostgresLockBuilder, PreparedStatementsUnsupported, TransactionPooler, deadpool_postgres,
    tokio_postgres,
};

// The etcd backend: a grant is a committed transaction, the fencing token its revision
// (feature `etcd`).
#[cfg(feature = "etcd")]
#[cfg_attr(docsrs, doc(cfg(feature = "etcd")))]
pub use lock_etcd::{EtcdLock, EtcdLockBuilder};

// Redlock: one lock over N independent Redis masters, granted by a quorum (feature `redlock`).
#[cfg(feature = "redlock")]
#[cfg_attr(docsrs, doc(cfg(feature = "redlock")))]
pub use lock_redlock::{QuorumNotReached, Redlock, RedlockBuilder, ValidityExpired};

// The backends' settings and helpers at their old crate-root paths, deprecated (the Redis ones
// too: an unprefixed `DEFAULT_CONNECT_TIMEOUT` at the root read as every backend's).
mod deprecated;
#[cfg(feature = "redis")]
#[allow(deprecated)]
pub use deprecated::{
    DEFAULT_COMMAND_TIMEOUT, DEFAULT_CONNECT_TIMEOUT, DEFAULT_FENCE_RETENTION, TOKEN_PREFIX,
    key_slot, token_value,
};
#[cfg(feature = "redlock")]
#[allow(deprecated)]
pub use deprecated::{
    DEFAULT_DRIFT_CONSTANT, DEFAULT_DRIFT_FACTOR, METRIC_NODE_ERRORS, METRIC_NODE_GRANTS,
    METRIC_NODE_REFUSALS, METRIC_NODE_TIMEOUTS, METRIC_QUORUM, NODE_TIMEOUT_CEILING,
    NODE_TIMEOUT_FLOOR, NODE_TIMEOUT_PERCENT, REDLOCK_PING_TIMEOUT, default_node_timeout,
    describe_redlock_metrics, quorum,
};
#[cfg(feature = "postgres")]
#[allow(deprecated)]
pub use deprecated::{
    POSTGRES_ADVISORY_POOL_SIZE, POSTGRES_CHANNEL, POSTGRES_CONNECT_TIMEOUT, POSTGRES_MIGRATION,
    POSTGRES_POOL_SIZE, POSTGRES_STATEMENT_TIMEOUT, POSTGRES_TABLE, advisory_key,
};

// `#[distributed_lock]` on async functions, the process-wide default locker it uses and the
// lease of the running locked function (feature `macros`, on by default).
#[cfg(feature = "macros")]
mod macros;
#[cfg(feature = "macros")]
#[cfg_attr(docsrs, doc(cfg(feature = "macros")))]
pub use lock_macros::distributed_lock;
#[cfg(feature = "macros")]
#[doc(hidden)]
pub use macros::support as __private;
#[cfg(feature = "macros")]
#[cfg_attr(docsrs, doc(cfg(feature = "macros")))]
pub use macros::{
    current_lease, current_leases, default_locker, set_default_locker, take_default_locker,
};
