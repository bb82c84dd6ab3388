#![doc = include_str!("docs/crate.md")]
#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]

// The repository README is no longer the crate's front page (that is `docs/crate.md`); its
// examples still compile as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

pub use lock_core::{
    Attempt, Backoff, BoxError, DEFAULT_LEASE, DEFAULT_RETRY_ERRORS_FOR, DEFAULT_WAIT,
    FAIR_ENTRY_TTL, Guard, Handover, Kind, Lease, LeaseWatch, Lock, LockError, LockRequest, Locker,
    LockerBuilder, MAX_MULTI, MAX_NAME_LEN, MAX_PERMITS, MAX_TTL, MIN_TTL, MemoryLock,
    MultiAttempt, MultiGuard, MultiRequest, Op, ParseTokenError, ReleaseSignal, ReleaseWatch,
    TimeoutPhase, Token, TokenHex, acquire_in_order, check_name, check_ttl, fair_entry_ttl, metric,
    valid_until,
};

// The Redis backend: one server, and with features `cluster` / `sentinel` / `tls` those
// topologies (feature `redis`, on by default). Plain comments, not doc comments: a doc comment
// on a `pub use` is prepended to every re-exported item's own documentation.
#[cfg(feature = "redis")]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
pub use lock_redis::{
    DEFAULT_COMMAND_TIMEOUT, DEFAULT_CONNECT_TIMEOUT, DEFAULT_FENCE_RETENTION, NotReplicated,
    RedisLock, RedisLockBuilder, ReplicaPolicy, TOKEN_PREFIX, TokenValue, deadpool_redis, key_slot,
    redis, token_value,
};

// The PostgreSQL backend: a lease table, releases announced with LISTEN/NOTIFY (feature
// `postgres`).
#[cfg(feature = "postgres")]
#[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
pub use lock_postgres::{
    CHANNEL as POSTGRES_CHANNEL, DEFAULT_CONNECT_TIMEOUT as POSTGRES_CONNECT_TIMEOUT,
    DEFAULT_POOL_SIZE as POSTGRES_POOL_SIZE,
    DEFAULT_STATEMENT_TIMEOUT as POSTGRES_STATEMENT_TIMEOUT, MIGRATION as POSTGRES_MIGRATION,
    MissingTable, PostgresError, PostgresLock, PostgresLockBuilder, PreparedStatementsUnsupported,
    TABLE as POSTGRES_TABLE, deadpool_postgres, tokio_postgres,
};
// Its opt-in advisory mode: session advisory locks with sqlx's keys.
#[cfg(feature = "postgres")]
#[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
pub use lock_postgres::{
    DEFAULT_ADVISORY_POOL_SIZE as POSTGRES_ADVISORY_POOL_SIZE, PostgresAdvisoryLock,
    PostgresAdvisoryLockBuilder, TransactionPooler, advisory_key,
};

// Redlock: one lock over N independent Redis masters, granted by a quorum (feature `redlock`).
#[cfg(feature = "redlock")]
#[cfg_attr(docsrs, doc(cfg(feature = "redlock")))]
pub use lock_redlock::{
    DEFAULT_DRIFT_CONSTANT, DEFAULT_DRIFT_FACTOR, METRIC_NODE_ERRORS, METRIC_NODE_GRANTS,
    METRIC_NODE_REFUSALS, METRIC_NODE_TIMEOUTS, METRIC_QUORUM, NODE_TIMEOUT_CEILING,
    NODE_TIMEOUT_FLOOR, NODE_TIMEOUT_PERCENT, PING_TIMEOUT as REDLOCK_PING_TIMEOUT,
    QuorumNotReached, Redlock, RedlockBuilder, ValidityExpired, default_node_timeout,
    describe_metrics as describe_redlock_metrics, quorum,
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
