//! Waiters by name: a request that [describes its waiter](crate::LockRequest::describe_waiter)
//! keeps, while it waits, a record of its own in the store (a renewed grant of the name
//! `NAME:distlock-waiter:ID` with the description as its note), so operators' tools list who
//! waits for a name (`distlock show`, the console), on every backend that keeps notes.
//!
//! Written once over the contract (`try_acquire`, `annotate`, `extend`, `release`). The record
//! is written only once the request has waited [`VISIBLE_AFTER`]: a request granted at once
//! costs nothing more, and a waiter worth seeing is seen a moment after it began to wait.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use crate::backend::{Attempt, Lock};
use crate::runtime::cleanup::ReleaseOnDrop;
use crate::{LockError, Token};

/// What a waiter's record's name adds to the lock's name, before the waiter's id.
const WAITER_RECORD: &str = ":distlock-waiter:";

/// How long a request waits before it writes its record: 100 ms.
pub const VISIBLE_AFTER: Duration = Duration::from_millis(100);

/// A record's lease: 6 s, renewed every 2 s while its request waits, so a waiter that died
/// is listed at most that long after.
const RECORD_LEASE: Duration = Duration::from_secs(6);

/// The name of the record of the waiter `id` (16 hex digits) of `name`.
fn record_name(name: &str, id: &str) -> String {
    format!("{name}{WAITER_RECORD}{id}")
}

/// The lock a waiter's record is for, if `name` is a waiter's record
/// (`NAME:distlock-waiter:ID`): for operator tools, which list the waiters under their lock.
#[must_use]
pub fn waiter_record_of(name: &str) -> Option<&str> {
    let (base, id) = name.rsplit_once(WAITER_RECORD)?;
    (id.len() == 16 && id.bytes().all(|b| b.is_ascii_hexdigit())).then_some(base)
}

/// Checks before any I/O that the waiter of `name` can describe itself: a backend that keeps
/// notes, a description that fits, a name with room for the record's suffix.
pub(super) fn check(lock: &dyn Lock, name: &str, description: &[u8]) -> Result<(), LockError> {
    if !lock.capabilities().holders {
        return Err(LockError::Unsupported {
            backend: lock.backend(),
            kind: "waiter description",
        });
    }
    crate::check_note(description)?;
    crate::check_name(&record_name(name, "0000000000000000"))
}

/// Runs `wait`; if it has not finished after [`VISIBLE_AFTER`], keeps the record of this
/// waiter of `name` (with `description`) in the store until it finishes. A record that
/// cannot be written is skipped (the wait is what matters); it is released when the wait
/// ends, and in the background if this future is dropped.
pub(super) async fn while_waiting<T>(
    lock: &Arc<dyn Lock>,
    name: &str,
    description: Arc<[u8]>,
    wait: impl Future<Output = T>,
) -> T {
    let mut wait = pin!(wait);
    tokio::select! {
        biased;
        done = &mut wait => return done,
        () = tokio::time::sleep(VISIBLE_AFTER) => {}
    }
    let keep = keep_record(lock, name, description);
    tokio::select! {
        biased;
        done = &mut wait => done,
        // Runs until the wait ends (it never finishes by itself).
        () = keep => wait.await,
    }
}

/// Writes the record and renews it every third of its lease, for ever; dropped, the record
/// is released (in the background). Returns early only when the record cannot be kept.
async fn keep_record(lock: &Arc<dyn Lock>, name: &str, description: Arc<[u8]>) {
    let Ok(token) = Token::generate() else {
        return;
    };
    let record = record_name(name, &token.to_hex().as_str()[..16]);
    let lease = match lock.try_acquire(&record, token, RECORD_LEASE).await {
        Ok(Attempt::Acquired(lease)) => lease,
        // Busy: the id is taken (128 random bits: never); an error: the store fails, which
        // the wait hears of too.
        Ok(Attempt::Busy { .. }) | Err(_) => return,
    };
    let armed = ReleaseOnDrop::new(Arc::clone(lock), lease.clone());
    if lock.annotate(&lease, &description).await.is_err() {
        return;
    }
    loop {
        tokio::time::sleep(RECORD_LEASE / 3).await;
        if !matches!(lock.extend(armed.lease(), RECORD_LEASE).await, Ok(Some(_))) {
            return;
        }
    }
}
