//! The object-storage backend (feature `object-store`): [`ObjectStoreLock`], one object per
//! lock on any store of the `object_store` crate that writes conditionally (S3 and
//! S3-compatible servers, GCS, Azure, the in-memory store), with everything lock-object-store
//! exports: its default, the fence of your own objects ([`fenced_put`]), errors, and the
//! `object_store` crate it is built on under its own name.

// Every name of lock-object-store resolves here through this glob, also one added or renamed
// there before the list below names it; hidden, because rustdoc would copy the client crate's
// whole documentation into this module's through a glob.
// While the list names everything, the glob brings nothing of its own: hence the allow.
#[doc(hidden)]
#[allow(unused_imports, unreachable_pub)]
pub use lock_object_store::*;

// The documented list: every public name of lock-object-store (the facade's `exports` test
// checks it against lock-object-store's lib.rs). Plain comments, not doc comments: a doc
// comment on a `pub use` is prepended to every re-exported item's own documentation.
pub use lock_object_store::{
    BACKEND, DEFAULT_OPERATION_TIMEOUT, FENCE_METADATA, LockError, LockObject, MAX_NOTE_BYTES,
    ObjectStoreError, ObjectStoreLock, ObjectStoreLockBuilder, fenced_put, metric, parse_s3,
};
// The client crate the backend is built on, under its own name: a link to its own
// documentation.
#[doc(no_inline)]
pub use lock_object_store::object_store;
