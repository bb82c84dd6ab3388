//! The grant: create the object when absent, else update it on the version read, when it is
//! released or when this lock has seen that version unchanged for a whole lease.

use std::time::Duration;

use lock_core::backend::Attempt;
use lock_core::{Lease, LockError, Op, Token, valid_until};
use object_store::path::Path;
use tokio::time::Instant;

use crate::body::Body;
use crate::shared::Shared;
use crate::store::{Current, Written};

/// One try at `name` for `ttl` with `token`.
pub(crate) async fn try_acquire(
    lock: &Shared,
    name: &str,
    token: Token,
    ttl: Duration,
) -> Result<Attempt, LockError> {
    lock.probe().await?;
    let key = lock.objects.key(name);
    let hex = token.to_hex();
    if let Some(attempt) = after_own_release(lock, name, &key, token, ttl).await? {
        return Ok(attempt);
    }
    let current = lock.objects.read(Op::Acquire, &key).await?;
    let next = match &current {
        None => Body::first(hex.as_str(), ttl),
        Some(cur) => match busy(lock, &key, cur) {
            Some(left) => return Ok(busy_answer(Some(left))),
            None => cur.body.granted(hex.as_str(), ttl),
        },
    };
    // The validity counts from before the write was sent: a contender's lease-long wait starts
    // after the store answered a read of this write, which is later.
    let started = Instant::now();
    let on = current.as_ref().map(|c| &c.version);
    match lock.objects.grant(&key, &next, on).await {
        Ok(Written::Done(version)) => {
            lock.observations.forget(key.as_ref());
            lock.held.put(&key, &token, version, next.clone());
            Ok(granted(lock, name, token, &next, started, ttl))
        }
        Ok(Written::Lost) => won_anyway(lock, name, &key, token, &next, started, ttl).await,
        Err(e) => Err(e),
    }
}

/// When this lock released `key` last, one conditional write on the version of that release:
/// granted when nobody wrote since (one request instead of a read and a write); `None` when
/// someone did (or this lock never released it), and the grant goes the usual way.
async fn after_own_release(
    lock: &Shared,
    name: &str,
    key: &Path,
    token: Token,
    ttl: Duration,
) -> Result<Option<Attempt>, LockError> {
    let Some((version, released)) = lock.held.take_released(key) else {
        return Ok(None);
    };
    let next = released.granted(token.to_hex().as_str(), ttl);
    let started = Instant::now();
    match lock.objects.grant(key, &next, Some(&version)).await? {
        Written::Done(version) => {
            lock.observations.forget(key.as_ref());
            lock.held.put(key, &token, version, next.clone());
            Ok(Some(granted(lock, name, token, &next, started, ttl)))
        }
        Written::Lost => Ok(None),
    }
}

/// `None` when `cur` may be taken now (released, or seen unchanged for its whole lease);
/// otherwise how long this lock has still to see it unchanged.
fn busy(lock: &Shared, key: &Path, cur: &Current) -> Option<Duration> {
    if cur.body.holder.is_none() {
        lock.observations.forget(key.as_ref());
        return None;
    }
    let lease = cur.body.lease();
    let seen = lock
        .observations
        .saw(key.as_ref(), &cur.version, lease, cur.received);
    let needed = lease + lock.drift(lease);
    // The busy answer's TTL is a hint for the waiter's backoff; it never exceeds the lease
    // the holder declared.
    (seen < needed).then(|| (needed - seen).min(lease))
}

/// A busy answer: the holder does not announce its release (nothing to subscribe to), so the
/// `Locker` polls with its backoff, bounded by the caller's deadline.
fn busy_answer(holder_ttl: Option<Duration>) -> Attempt {
    Attempt::Busy {
        holder_ttl,
        announces: false,
    }
}

/// The lease of a write of `body` sent at `started`.
fn granted(
    lock: &Shared,
    name: &str,
    token: Token,
    body: &Body,
    started: Instant,
    ttl: Duration,
) -> Attempt {
    let valid = valid_until(started, ttl.saturating_sub(lock.drift(ttl)));
    Attempt::Acquired(Lease::new(name, token, body.epoch, valid))
}

/// The conditional write failed: another contender came first, or this very write landed
/// and its answer was lost (the client retried it, and the retry found its own object). A
/// read tells which.
async fn won_anyway(
    lock: &Shared,
    name: &str,
    key: &Path,
    token: Token,
    next: &Body,
    started: Instant,
    ttl: Duration,
) -> Result<Attempt, LockError> {
    match lock.objects.read(Op::Acquire, key).await? {
        Some(cur) if cur.body.held_by(token.to_hex().as_str()) && cur.body.epoch == next.epoch => {
            lock.held.put(key, &token, cur.version, cur.body);
            Ok(granted(lock, name, token, next, started, ttl))
        }
        Some(cur) => {
            let left = busy(lock, key, &cur).unwrap_or(Duration::ZERO);
            Ok(busy_answer(Some(left)))
        }
        None => Ok(busy_answer(None)),
    }
}
