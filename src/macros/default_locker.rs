//! The process-wide default `Locker`, used by `#[distributed_lock]` functions that name none.

use std::sync::{PoisonError, RwLock};

use lock_core::{LockError, Locker};

static DEFAULT: RwLock<Option<Locker>> = RwLock::new(None);

/// Installs `locker` as the process-wide default, used by every `#[distributed_lock]` function
/// without a `locker = ..` option, and returns the one it replaces.
///
/// Call it once at start-up, before the first locked function runs:
///
/// ```
/// use distlock::{Locker, MemoryLock};
///
/// let previous = distlock::set_default_locker(Locker::new(MemoryLock::new()));
/// assert!(previous.is_none());
/// assert_eq!(distlock::default_locker()?.backend(), "memory");
/// # Ok::<(), distlock::LockError>(())
/// ```
///
/// Replacing it later is allowed (tests do) and affects calls made afterwards; calls in flight
/// keep the locker they started with.
pub fn set_default_locker(locker: Locker) -> Option<Locker> {
    DEFAULT
        .write()
        .unwrap_or_else(PoisonError::into_inner)
        .replace(locker)
}

/// Removes the process-wide default locker and returns it; locked functions without a
/// `locker = ..` option fail (see [`default_locker`]) until another is installed.
pub fn take_default_locker() -> Option<Locker> {
    DEFAULT
        .write()
        .unwrap_or_else(PoisonError::into_inner)
        .take()
}

/// The process-wide default locker (a clone: one `Arc`).
///
/// # Errors
/// [`LockError::InvalidInput`] when none was installed with [`set_default_locker`]: a
/// configuration mistake, reported like other input the lock refuses before any I/O
/// (nothing is sent, and it is not retryable). Its message says what to do.
pub fn default_locker() -> Result<Locker, LockError> {
    DEFAULT
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .clone()
        .ok_or_else(|| {
            LockError::invalid(
                "no default locker is installed: call `distlock::set_default_locker(..)` at \
                 start-up, or give #[distributed_lock] a `locker = ..` option",
            )
        })
}
