//! The etcd backend (feature `etcd`): [`EtcdLock`], where a grant is a committed transaction
//! of a consensus store, the fencing token is the revision that wrote it, and releases are
//! announced through a watch; its defaults, and the etcd client it is built on.
//!
//! The lock type and its builder are also at the crate root ([`crate::EtcdLock`]); the
//! settings keep their own names here (`distlock::etcd::DEFAULT_PREFIX`).

// Plain comments, not doc comments: a doc comment on a `pub use` is prepended to every
// re-exported item's own documentation.
pub use lock_etcd::{
    DEFAULT_COMMAND_TIMEOUT, DEFAULT_CONNECT_TIMEOUT, DEFAULT_PREFIX, EtcdLock, EtcdLockBuilder,
    MAX_NOTE_BYTES, etcd_client,
};
