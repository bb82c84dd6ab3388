//! The etcd backend (feature `etcd`): [`EtcdLock`], where a grant is a committed transaction
//! of a consensus store, the fencing token is the revision that wrote it, and releases are
//! announced through a watch, with everything lock-etcd exports: its defaults and the etcd
//! client crate it is built on ([`etcd_client`]) under its own name.

// Every name of lock-etcd resolves here through this glob, also one added or renamed there before
// the list below names it; hidden, because rustdoc would copy the client crates' whole
// documentation into this module's through a glob.
// While the list names everything, the glob brings nothing of its own: hence the allow.
#[doc(hidden)]
#[allow(unused_imports, unreachable_pub)]
pub use lock_etcd::*;

// The documented list: every public name of lock-etcd (the facade's `exports` test checks it
// against lock-etcd's lib.rs). Plain comments, not doc comments: a doc comment on a `pub use` is
// prepended to every re-exported item's own documentation.
pub use lock_etcd::{
    BACKEND, DEFAULT_CONNECT_TIMEOUT, DEFAULT_OPERATION_TIMEOUT, DEFAULT_PREFIX, EtcdError,
    EtcdLock, EtcdLockBuilder, LockError, MAX_NOTE_BYTES, metric,
};
// The client crate the backend is built on, under its own name: a link to its own
// documentation.
#[doc(no_inline)]
pub use lock_etcd::etcd_client;
