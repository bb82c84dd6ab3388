//! The PostgreSQL backend (feature `postgres`): [`PostgresLock`], a lease table (every lock
//! kind) whose releases are announced with LISTEN/NOTIFY, and its opt-in advisory mode
//! [`PostgresAdvisoryLock`] (session advisory locks with sqlx's keys, the mutex only), with
//! everything lock-postgres exports: their defaults, the schema's SQL, the fence of guarded writes
//! ([`fence`], and `fence_sqlx` with feature `sqlx`), errors, and the client
//! crates they are built on ([`tokio_postgres`], [`deadpool_postgres`]) under their own names.

// Every name of lock-postgres resolves here through this glob, also one added or renamed there before
// the list below names it; hidden, because rustdoc would copy the client crates' whole
// documentation into this module's through a glob.
// While the list names everything, the glob brings nothing of its own: hence the allow.
#[doc(hidden)]
#[allow(unused_imports, unreachable_pub)]
pub use lock_postgres::*;

// The documented list: every public name of lock-postgres (the facade's `exports` test checks it
// against lock-postgres's lib.rs). Plain comments, not doc comments: a doc comment on a `pub use` is
// prepended to every re-exported item's own documentation.
pub use lock_postgres::{
    AdvisorySession, BACKEND, CHANNEL, DEFAULT_ADVISORY_POOL_SIZE, DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_OPERATION_TIMEOUT, DEFAULT_POOL_SIZE, FENCE_TABLE, FENCED_SQLSTATE, LockError,
    Lookalike, MAX_NOTE_BYTES, MIGRATION, MissingTable, PostgresAdvisoryLock,
    PostgresAdvisoryLockBuilder, PostgresError, PostgresLock, PostgresLockBuilder,
    PreparedStatementsUnsupported, SCHEMA_VERSION, TABLE, TURN_CHANNEL, TransactionPooler,
    UnsupportedServer, advisory_key, fence, metric,
};
// The fence through sqlx (feature `sqlx`).
#[cfg(feature = "sqlx")]
#[cfg_attr(docsrs, doc(cfg(feature = "sqlx")))]
pub use lock_postgres::fence_sqlx;
// The client crates the backend is built on, under their own names: links to their own
// documentation.
#[doc(no_inline)]
pub use lock_postgres::{deadpool_postgres, tokio_postgres};
