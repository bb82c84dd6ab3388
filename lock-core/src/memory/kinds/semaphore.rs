//! The semaphore of a name: `max` permits, each holder with its own lease for `k` of them.

use std::time::Duration;

use tokio::time::Instant;

use crate::backend::Attempt;
use crate::lease::valid_until;
use crate::memory::store::Store;
use crate::{Kind, Lease, LockError, Token};

/// `kind`'s permits of the semaphore `name`, if that many are free.
///
/// # Errors
/// [`LockError::PermitsMismatch`] when the semaphore is held with another `max`.
pub(in crate::memory) fn try_acquire(
    store: &mut Store,
    name: &str,
    kind: Kind,
    token: Token,
    ttl: Duration,
) -> Result<Attempt, LockError> {
    let Kind::Semaphore { permits, max } = kind else {
        unreachable!("called for semaphores only");
    };
    let now = Instant::now();
    let semaphore = store.semaphores.entry(name.to_owned()).or_default();
    semaphore.prune(now);
    if semaphore.holders.is_empty() {
        semaphore.max = max;
    } else if semaphore.max != max {
        return Err(LockError::PermitsMismatch {
            name: name.to_owned(),
            max,
            held_max: semaphore.max,
        });
    }
    if semaphore.in_use().saturating_add(permits) > max {
        return Ok(Attempt::Busy {
            // The first permits free up when the soonest holder expires, at the latest.
            holder_ttl: semaphore.holders.values().map(|(_, at)| *at - now).min(),
            announces: true,
        });
    }
    let expires = valid_until(now, ttl);
    semaphore.holders.insert(token, (permits, expires));
    Ok(Attempt::Acquired(
        Lease::new(name, token, 0, expires).with_kind(kind),
    ))
}
