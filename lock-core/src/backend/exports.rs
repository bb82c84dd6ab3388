//! The export list every backend crate writes with one macro, so that switching a backend
//! changes a crate name and nothing else a user reaches for.

/// Writes a backend crate's common exports at its root: the lock type, its builder, the
/// backend's name in errors and metrics (`BACKEND`), its default timeouts where it has its own
/// (`DEFAULT_CONNECT_TIMEOUT` for a connect phase, `DEFAULT_OPERATION_TIMEOUT` for one
/// request, a `Duration` each; a Redlock's come from its nodes), the longest note its holders may write
/// (`MAX_NOTE_BYTES`), its own error type where it has one, lock-core's [`LockError`] (every
/// operation's error), and `metric`, the series names: lock-core's [`metric`] for a crate with
/// none of its own (a crate with its own `pub mod metric` re-exports lock-core's names there).
/// Each argument is the path of the item, from the crate's root. The model is deadpool's `managed_reexports!`: one list,
/// the same in every backend crate, checked by the facade's `exports` test.
///
/// ```ignore
/// lock_core::backend_exports! {
///     lock: redis_lock::RedisLock,
///     builder: config::RedisLockBuilder,
///     backend: error::BACKEND,
///     connect_timeout: settings::DEFAULT_CONNECT_TIMEOUT,
///     operation_timeout: settings::DEFAULT_OPERATION_TIMEOUT,
///     max_note_bytes: kinds::note::MAX_NOTE_BYTES,
/// }
/// ```
///
/// [`LockError`]: crate::LockError
/// [`metric`]: crate::metric
#[macro_export]
macro_rules! backend_exports {
    (
        lock: $($lock:ident)::+,
        builder: $($builder:ident)::+,
        backend: $($backend:ident)::+,
        $(connect_timeout: $($connect:ident)::+,)?
        $(operation_timeout: $($operation:ident)::+,)?
        max_note_bytes: $($note:ident)::+
        $(, error: $($error:ident)::+)?
        $(, metric: $($metric:ident)::+)?
        $(,)?
    ) => {
        pub use $($lock)::+;
        pub use $($builder)::+;
        pub use $($backend)::+;
        $(pub use $($connect)::+;)?
        $(pub use $($operation)::+;)?
        pub use $($note)::+;
        $(pub use $($error)::+;)?
        $(pub use $($metric)::+;)?
        pub use $crate::LockError;
    };
}
