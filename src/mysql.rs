//! The MySQL / MariaDB backend (feature `mysql`): [`MysqlLock`], a lease table (every lock
//! kind, strict fencing tokens on the server's clock, waiters poll), and its advisory mode
//! [`MysqlAdvisoryLock`] (`GET_LOCK` session locks, the mutex only), the guarded write
//! [`fence`] (`CALL distlock_fence(resource, token)`), with everything lock-mysql exports: their defaults, the schema's SQL, errors, and the client crate they are built on
//! ([`sqlx`]) under its own name.

// Every name of lock-mysql resolves here through this glob, also one added there before the
// list below names it; hidden, because rustdoc would copy the client crate's whole
// documentation into this module's through a glob.
#[doc(hidden)]
#[allow(unused_imports, unreachable_pub)]
pub use lock_mysql::*;

// The documented list: every public name of lock-mysql (the facade's `exports` test checks it
// against lock-mysql's lib.rs).
pub use lock_mysql::{
    BACKEND, DEFAULT_ADVISORY_POOL_SIZE, DEFAULT_CONNECT_TIMEOUT, DEFAULT_OPERATION_TIMEOUT,
    DEFAULT_POOL_SIZE, FENCE_TABLE, FENCED_SQLSTATE, LockError, MAX_LOCK_NAME_CHARS,
    MAX_NOTE_BYTES, MIGRATION, MissingTable, MysqlAdvisoryLock, MysqlAdvisoryLockBuilder,
    MysqlLock, MysqlLockBuilder, SCHEMA_VERSION, TABLE, advisory_name, fence, metric,
};
// The client crate the backend is built on, under its own name.
#[doc(no_inline)]
pub use lock_mysql::sqlx;
