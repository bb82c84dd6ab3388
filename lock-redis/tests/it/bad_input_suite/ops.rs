//! The few lock operations the cases are made of, reporting an [`Outcome`].

use std::time::Duration;

use lock_core::{Guard, LockError, LockRequest, Locker};

use super::harness::{Answer, Outcome};

/// Tries once; a grant is released at once and must still have been ours.
pub(crate) async fn try_once(request: LockRequest) -> Outcome {
    match request.try_acquire().await? {
        Some(guard) => release(guard).await,
        None => Ok(Answer::Busy),
    }
}

/// Releases and reports a lease still ours as [`Answer::Granted`]: the lock worked end to end.
pub(crate) async fn release(guard: Guard) -> Outcome {
    Ok(if owned(guard.release().await)? {
        Answer::Granted
    } else {
        Answer::Released(false)
    })
}

/// Takes `name` with a fixed TTL, for a case to then break something and use the guard.
pub(crate) async fn hold(locker: &Locker, name: &str, ttl: Duration) -> Guard {
    locker
        .lock(name)
        .fixed_ttl(ttl)
        .try_acquire()
        .await
        .unwrap_or_else(|e| panic!("setup: taking {name:?}: {e}"))
        .unwrap_or_else(|| panic!("setup: {name:?} is free"))
}

/// A lock round trip on a throwaway name, so the connection is made (and the scripts loaded)
/// before the fault hits the operation under test.
pub(crate) async fn warm_up(locker: &Locker) {
    try_once(locker.lock("suite:warm-up"))
        .await
        .unwrap_or_else(|e| panic!("setup: warming up: {e}"));
}

/// Maps an extend's result onto the suite's answers: `Ok` becomes whatever the release then says.
pub(crate) async fn extend_then_release(mut guard: Guard, ttl: Duration) -> Outcome {
    let extended = guard.extend(ttl).await;
    let released = guard.release().await;
    extended?;
    Ok(if owned(released)? {
        Answer::Granted
    } else {
        Answer::Released(false)
    })
}

/// A release's answer as the suite records it: `true` when the lease was ours, `false` for
/// [`LockError::NotOwned`].
pub(crate) fn owned(result: Result<(), LockError>) -> Result<bool, LockError> {
    match result {
        Ok(()) => Ok(true),
        Err(LockError::NotOwned { .. }) => Ok(false),
        Err(error) => Err(error),
    }
}

/// `Ok` when `result` is, else the error: for checks inside a case that must not fail.
pub(crate) fn must<T>(what: &str, result: Result<T, LockError>) -> T {
    result.unwrap_or_else(|e| panic!("{what}: {e}"))
}
