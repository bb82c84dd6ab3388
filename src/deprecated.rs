//! The crate-root paths of backend types, settings and helpers from before they had a module
//! per backend (`distlock::redis`, `distlock::postgres`, `distlock::redlock`, `distlock::etcd`):
//! deprecated copies, kept for one release. A `pub use` cannot carry `#[deprecated]`, hence
//! type aliases, consts and wrapper fns.

#[cfg(any(feature = "redis", feature = "postgres", feature = "redlock"))]
use std::time::Duration;

/// The Redis backend's default connect timeout: use [`redis::DEFAULT_CONNECT_TIMEOUT`](crate::redis::DEFAULT_CONNECT_TIMEOUT).
#[cfg(feature = "redis")]
#[deprecated(note = "use `distlock::redis::DEFAULT_CONNECT_TIMEOUT`")]
pub const DEFAULT_CONNECT_TIMEOUT: Duration = crate::redis::DEFAULT_CONNECT_TIMEOUT;

/// The Redis backend's default command timeout: use [`redis::DEFAULT_COMMAND_TIMEOUT`](crate::redis::DEFAULT_COMMAND_TIMEOUT).
#[cfg(feature = "redis")]
#[deprecated(note = "use `distlock::redis::DEFAULT_COMMAND_TIMEOUT`")]
pub const DEFAULT_COMMAND_TIMEOUT: Duration = crate::redis::DEFAULT_COMMAND_TIMEOUT;

/// How long the Redis backend keeps a name's fencing counter by default: use [`redis::DEFAULT_FENCE_RETENTION`](crate::redis::DEFAULT_FENCE_RETENTION).
#[cfg(feature = "redis")]
#[deprecated(note = "use `distlock::redis::DEFAULT_FENCE_RETENTION`")]
pub const DEFAULT_FENCE_RETENTION: Duration = crate::redis::DEFAULT_FENCE_RETENTION;

/// The prefix of the values distlock stores under Redis lock keys: use [`redis::TOKEN_PREFIX`](crate::redis::TOKEN_PREFIX).
#[cfg(feature = "redis")]
#[deprecated(note = "use `distlock::redis::TOKEN_PREFIX`")]
pub const TOKEN_PREFIX: &str = crate::redis::TOKEN_PREFIX;

/// The PostgreSQL backend's LISTEN/NOTIFY channel: use [`postgres::CHANNEL`](crate::postgres::CHANNEL).
#[cfg(feature = "postgres")]
#[deprecated(note = "use `distlock::postgres::CHANNEL`")]
pub const POSTGRES_CHANNEL: &str = crate::postgres::CHANNEL;

/// The PostgreSQL backend's default connect timeout: use [`postgres::DEFAULT_CONNECT_TIMEOUT`](crate::postgres::DEFAULT_CONNECT_TIMEOUT).
#[cfg(feature = "postgres")]
#[deprecated(note = "use `distlock::postgres::DEFAULT_CONNECT_TIMEOUT`")]
pub const POSTGRES_CONNECT_TIMEOUT: Duration = crate::postgres::DEFAULT_CONNECT_TIMEOUT;

/// The PostgreSQL backend's default pool size: use [`postgres::DEFAULT_POOL_SIZE`](crate::postgres::DEFAULT_POOL_SIZE).
#[cfg(feature = "postgres")]
#[deprecated(note = "use `distlock::postgres::DEFAULT_POOL_SIZE`")]
pub const POSTGRES_POOL_SIZE: usize = crate::postgres::DEFAULT_POOL_SIZE;

/// The PostgreSQL backend's default statement timeout: use [`postgres::DEFAULT_STATEMENT_TIMEOUT`](crate::postgres::DEFAULT_STATEMENT_TIMEOUT).
#[cfg(feature = "postgres")]
#[deprecated(note = "use `distlock::postgres::DEFAULT_STATEMENT_TIMEOUT`")]
pub const POSTGRES_STATEMENT_TIMEOUT: Duration = crate::postgres::DEFAULT_STATEMENT_TIMEOUT;

/// The SQL that creates the PostgreSQL lease table: use [`postgres::MIGRATION`](crate::postgres::MIGRATION).
#[cfg(feature = "postgres")]
#[deprecated(note = "use `distlock::postgres::MIGRATION`")]
pub const POSTGRES_MIGRATION: &str = crate::postgres::MIGRATION;

/// The PostgreSQL lease table's name: use [`postgres::TABLE`](crate::postgres::TABLE).
#[cfg(feature = "postgres")]
#[deprecated(note = "use `distlock::postgres::TABLE`")]
pub const POSTGRES_TABLE: &str = crate::postgres::TABLE;

/// The PostgreSQL advisory mode's default pool size: use [`postgres::DEFAULT_ADVISORY_POOL_SIZE`](crate::postgres::DEFAULT_ADVISORY_POOL_SIZE).
#[cfg(feature = "postgres")]
#[deprecated(note = "use `distlock::postgres::DEFAULT_ADVISORY_POOL_SIZE`")]
pub const POSTGRES_ADVISORY_POOL_SIZE: usize = crate::postgres::DEFAULT_ADVISORY_POOL_SIZE;

/// Redlock's default constant clock-drift allowance: use [`redlock::DEFAULT_DRIFT_CONSTANT`](crate::redlock::DEFAULT_DRIFT_CONSTANT).
#[cfg(feature = "redlock")]
#[deprecated(note = "use `distlock::redlock::DEFAULT_DRIFT_CONSTANT`")]
pub const DEFAULT_DRIFT_CONSTANT: Duration = crate::redlock::DEFAULT_DRIFT_CONSTANT;

/// Redlock's default clock-drift factor: use [`redlock::DEFAULT_DRIFT_FACTOR`](crate::redlock::DEFAULT_DRIFT_FACTOR).
#[cfg(feature = "redlock")]
#[deprecated(note = "use `distlock::redlock::DEFAULT_DRIFT_FACTOR`")]
pub const DEFAULT_DRIFT_FACTOR: f64 = crate::redlock::DEFAULT_DRIFT_FACTOR;

/// Redlock's per-node error counter: use [`redlock::metric::NODE_ERRORS`](crate::redlock::metric::NODE_ERRORS).
#[cfg(feature = "redlock")]
#[deprecated(note = "use `distlock::redlock::metric::NODE_ERRORS`")]
pub const METRIC_NODE_ERRORS: &str = crate::redlock::metric::NODE_ERRORS;

/// Redlock's per-node grant counter: use [`redlock::metric::NODE_GRANTS`](crate::redlock::metric::NODE_GRANTS).
#[cfg(feature = "redlock")]
#[deprecated(note = "use `distlock::redlock::metric::NODE_GRANTS`")]
pub const METRIC_NODE_GRANTS: &str = crate::redlock::metric::NODE_GRANTS;

/// Redlock's per-node refusal counter: use [`redlock::metric::NODE_REFUSALS`](crate::redlock::metric::NODE_REFUSALS).
#[cfg(feature = "redlock")]
#[deprecated(note = "use `distlock::redlock::metric::NODE_REFUSALS`")]
pub const METRIC_NODE_REFUSALS: &str = crate::redlock::metric::NODE_REFUSALS;

/// Redlock's per-node timeout counter: use [`redlock::metric::NODE_TIMEOUTS`](crate::redlock::metric::NODE_TIMEOUTS).
#[cfg(feature = "redlock")]
#[deprecated(note = "use `distlock::redlock::metric::NODE_TIMEOUTS`")]
pub const METRIC_NODE_TIMEOUTS: &str = crate::redlock::metric::NODE_TIMEOUTS;

/// Redlock's round outcome counter: use [`redlock::metric::QUORUM`](crate::redlock::metric::QUORUM).
#[cfg(feature = "redlock")]
#[deprecated(note = "use `distlock::redlock::metric::QUORUM`")]
pub const METRIC_QUORUM: &str = crate::redlock::metric::QUORUM;

/// The most Redlock's default node timeout allows: use [`redlock::NODE_TIMEOUT_CEILING`](crate::redlock::NODE_TIMEOUT_CEILING).
#[cfg(feature = "redlock")]
#[deprecated(note = "use `distlock::redlock::NODE_TIMEOUT_CEILING`")]
pub const NODE_TIMEOUT_CEILING: Duration = crate::redlock::NODE_TIMEOUT_CEILING;

/// The least Redlock's default node timeout allows: use [`redlock::NODE_TIMEOUT_FLOOR`](crate::redlock::NODE_TIMEOUT_FLOOR).
#[cfg(feature = "redlock")]
#[deprecated(note = "use `distlock::redlock::NODE_TIMEOUT_FLOOR`")]
pub const NODE_TIMEOUT_FLOOR: Duration = crate::redlock::NODE_TIMEOUT_FLOOR;

/// Redlock's default node timeout, in percent of the lease: use [`redlock::NODE_TIMEOUT_PERCENT`](crate::redlock::NODE_TIMEOUT_PERCENT).
#[cfg(feature = "redlock")]
#[deprecated(note = "use `distlock::redlock::NODE_TIMEOUT_PERCENT`")]
pub const NODE_TIMEOUT_PERCENT: u32 = crate::redlock::NODE_TIMEOUT_PERCENT;

/// How long Redlock's ping waits for each node: use [`redlock::PING_TIMEOUT`](crate::redlock::PING_TIMEOUT).
#[cfg(feature = "redlock")]
#[deprecated(note = "use `distlock::redlock::PING_TIMEOUT`")]
pub const REDLOCK_PING_TIMEOUT: Duration = crate::redlock::PING_TIMEOUT;

/// The Redis Cluster hash slot of `key`: use [`redis::key_slot`](crate::redis::key_slot).
#[cfg(feature = "redis")]
#[deprecated(note = "use `distlock::redis::key_slot`")]
#[must_use]
pub fn key_slot(key: &str) -> u16 {
    crate::redis::key_slot(key)
}

/// The value distlock stores under a Redis lock key for `token`: use
/// [`redis::token_value`](crate::redis::token_value).
#[cfg(feature = "redis")]
#[deprecated(note = "use `distlock::redis::token_value`")]
#[must_use]
pub fn token_value(token: &lock_core::Token) -> crate::redis::TokenValue {
    crate::redis::token_value(token)
}

/// The advisory lock key of `name`: use [`postgres::advisory_key`](crate::postgres::advisory_key).
#[cfg(feature = "postgres")]
#[deprecated(note = "use `distlock::postgres::advisory_key`")]
#[must_use]
pub fn advisory_key(name: &str) -> i64 {
    crate::postgres::advisory_key(name)
}

/// Redlock's default node timeout for a lease of `ttl`: use
/// [`redlock::default_node_timeout`](crate::redlock::default_node_timeout).
#[cfg(feature = "redlock")]
#[deprecated(note = "use `distlock::redlock::default_node_timeout`")]
#[must_use]
pub fn default_node_timeout(ttl: Duration) -> Duration {
    crate::redlock::default_node_timeout(ttl)
}

/// The quorum of `nodes` Redlock nodes: use [`redlock::quorum`](crate::redlock::quorum).
#[cfg(feature = "redlock")]
#[deprecated(note = "use `distlock::redlock::quorum`")]
#[must_use]
pub const fn quorum(nodes: usize) -> usize {
    crate::redlock::quorum(nodes)
}

/// Describes Redlock's per-node metrics to the installed recorder: use
/// [`redlock::metric::describe`](crate::redlock::metric::describe).
#[cfg(feature = "redlock")]
#[deprecated(note = "use `distlock::redlock::metric::describe`")]
pub fn describe_redlock_metrics() {
    crate::redlock::metric::describe();
}

// The backends' types.

/// The Redis lock: use [`redis::RedisLock`](crate::redis::RedisLock).
#[cfg(feature = "redis")]
#[deprecated(note = "use `distlock::redis::RedisLock`")]
pub type RedisLock = crate::redis::RedisLock;

/// The Redis lock's builder: use [`redis::RedisLockBuilder`](crate::redis::RedisLockBuilder).
#[cfg(feature = "redis")]
#[deprecated(note = "use `distlock::redis::RedisLockBuilder`")]
pub type RedisLockBuilder = crate::redis::RedisLockBuilder;

/// The Redis server may evict lock keys: use [`redis::EvictionRisk`](crate::redis::EvictionRisk).
#[cfg(feature = "redis")]
#[deprecated(note = "use `distlock::redis::EvictionRisk`")]
pub type EvictionRisk = crate::redis::EvictionRisk;

/// A Redis grant not replicated as asked: use [`redis::NotReplicated`](crate::redis::NotReplicated).
#[cfg(feature = "redis")]
#[deprecated(note = "use `distlock::redis::NotReplicated`")]
pub type NotReplicated = crate::redis::NotReplicated;

/// What the Redis lock asks of replicas: use [`redis::ReplicaPolicy`](crate::redis::ReplicaPolicy).
#[cfg(feature = "redis")]
#[deprecated(note = "use `distlock::redis::ReplicaPolicy`")]
pub type ReplicaPolicy = crate::redis::ReplicaPolicy;

/// The value stored under a Redis lock key: use [`redis::TokenValue`](crate::redis::TokenValue).
#[cfg(feature = "redis")]
#[deprecated(note = "use `distlock::redis::TokenValue`")]
pub type TokenValue = crate::redis::TokenValue;

/// The PostgreSQL lease-table lock: use [`postgres::PostgresLock`](crate::postgres::PostgresLock).
#[cfg(feature = "postgres")]
#[deprecated(note = "use `distlock::postgres::PostgresLock`")]
pub type PostgresLock = crate::postgres::PostgresLock;

/// The PostgreSQL lock's builder: use [`postgres::PostgresLockBuilder`](crate::postgres::PostgresLockBuilder).
#[cfg(feature = "postgres")]
#[deprecated(note = "use `distlock::postgres::PostgresLockBuilder`")]
pub type PostgresLockBuilder = crate::postgres::PostgresLockBuilder;

/// The PostgreSQL advisory lock: use [`postgres::PostgresAdvisoryLock`](crate::postgres::PostgresAdvisoryLock).
#[cfg(feature = "postgres")]
#[deprecated(note = "use `distlock::postgres::PostgresAdvisoryLock`")]
pub type PostgresAdvisoryLock = crate::postgres::PostgresAdvisoryLock;

/// The PostgreSQL advisory lock's builder: use [`postgres::PostgresAdvisoryLockBuilder`](crate::postgres::PostgresAdvisoryLockBuilder).
#[cfg(feature = "postgres")]
#[deprecated(note = "use `distlock::postgres::PostgresAdvisoryLockBuilder`")]
pub type PostgresAdvisoryLockBuilder = crate::postgres::PostgresAdvisoryLockBuilder;

/// The PostgreSQL lease table is missing: use [`postgres::MissingTable`](crate::postgres::MissingTable).
#[cfg(feature = "postgres")]
#[deprecated(note = "use `distlock::postgres::MissingTable`")]
pub type MissingTable = crate::postgres::MissingTable;

/// A PostgreSQL client error: use [`postgres::PostgresError`](crate::postgres::PostgresError).
#[cfg(feature = "postgres")]
#[deprecated(note = "use `distlock::postgres::PostgresError`")]
pub type PostgresError = crate::postgres::PostgresError;

/// A PostgreSQL pooler refused prepared statements: use [`postgres::PreparedStatementsUnsupported`](crate::postgres::PreparedStatementsUnsupported).
#[cfg(feature = "postgres")]
#[deprecated(note = "use `distlock::postgres::PreparedStatementsUnsupported`")]
pub type PreparedStatementsUnsupported = crate::postgres::PreparedStatementsUnsupported;

/// A PostgreSQL transaction pooler under the advisory lock: use [`postgres::TransactionPooler`](crate::postgres::TransactionPooler).
#[cfg(feature = "postgres")]
#[deprecated(note = "use `distlock::postgres::TransactionPooler`")]
pub type TransactionPooler = crate::postgres::TransactionPooler;

/// The etcd lock: use [`etcd::EtcdLock`](crate::etcd::EtcdLock).
#[cfg(feature = "etcd")]
#[deprecated(note = "use `distlock::etcd::EtcdLock`")]
pub type EtcdLock = crate::etcd::EtcdLock;

/// The etcd lock's builder: use [`etcd::EtcdLockBuilder`](crate::etcd::EtcdLockBuilder).
#[cfg(feature = "etcd")]
#[deprecated(note = "use `distlock::etcd::EtcdLockBuilder`")]
pub type EtcdLockBuilder = crate::etcd::EtcdLockBuilder;

/// The Redlock lock: use [`redlock::Redlock`](crate::redlock::Redlock).
#[cfg(feature = "redlock")]
#[deprecated(note = "use `distlock::redlock::Redlock`")]
pub type Redlock = crate::redlock::Redlock;

/// The Redlock lock's builder: use [`redlock::RedlockBuilder`](crate::redlock::RedlockBuilder).
#[cfg(feature = "redlock")]
#[deprecated(note = "use `distlock::redlock::RedlockBuilder`")]
pub type RedlockBuilder = crate::redlock::RedlockBuilder;

/// Too few Redlock nodes granted: use [`redlock::QuorumNotReached`](crate::redlock::QuorumNotReached).
#[cfg(feature = "redlock")]
#[deprecated(note = "use `distlock::redlock::QuorumNotReached`")]
pub type QuorumNotReached = crate::redlock::QuorumNotReached;

/// A Redlock quorum that left no validity: use [`redlock::ValidityExpired`](crate::redlock::ValidityExpired).
#[cfg(feature = "redlock")]
#[deprecated(note = "use `distlock::redlock::ValidityExpired`")]
pub type ValidityExpired = crate::redlock::ValidityExpired;

/// The Redis store grace period by default: use [`redis::DEFAULT_GRACE`](crate::redis::DEFAULT_GRACE).
#[cfg(feature = "redis")]
#[deprecated(note = "use `distlock::redis::DEFAULT_GRACE`")]
pub const DEFAULT_GRACE: Duration = crate::redis::DEFAULT_GRACE;
