//! What the holder writes over its own object: renewals, its release, its note, a hand-over.
//! Each is a conditional update on the version of the holder's last write (one request); when
//! that fails, a read says whether the object is still the lease's (same token, same epoch)
//! and the update is tried once more on the version read.

use std::time::Duration;

use lock_core::backend::Handover;
use lock_core::{Lease, LockError, Op, Token, valid_until};
use object_store::UpdateVersion;
use tokio::time::Instant;

use crate::body::Body;
use crate::shared::Shared;
use crate::store::Written;

/// What a successful rewrite wrote: the body, when its write was sent, the new version.
type Rewritten = (Body, Instant, UpdateVersion);

/// Conditional updates tried before a lease whose object keeps changing under it is given up:
/// only the holder writes a held object, so a second conflict means another writer.
const TRIES: u32 = 2;

/// Writes `change(body)` over the object of `lease` if it is still the lease's. Returns the
/// body written, when its write was sent and the new version; `None` when the lease is no
/// longer ours.
async fn rewrite(
    lock: &Shared,
    lease: &Lease,
    op: Op,
    change: impl Fn(&Body) -> Body,
) -> Result<Option<Rewritten>, LockError> {
    let key = lock.objects.key(lease.name());
    let token = *lease.token();
    let hex = token.to_hex();
    let mut last = lock.held.get(&key, &token);
    for _ in 0..TRIES {
        let (version, body) = match last.take() {
            Some(known) => known,
            None => match lock.objects.read(op, &key).await? {
                Some(cur) if cur.body.held_by(hex.as_str()) && same_grant(&cur.body, lease) => {
                    (cur.version, cur.body)
                }
                _ => {
                    lock.held.forget(&key, &token);
                    return Ok(None);
                }
            },
        };
        let next = change(&body);
        let started = Instant::now();
        match lock.objects.write(op, &key, &next, Some(&version)).await? {
            Written::Done(version) => {
                lock.held.put(&key, &token, version.clone(), next.clone());
                return Ok(Some((next, started, version)));
            }
            Written::Lost => continue,
        }
    }
    lock.held.forget(&key, &token);
    Ok(None)
}

/// Whether `body`, held by `lease`'s token, is `lease`'s grant. A token is fresh for every
/// attempt, so the token alone says so; the epoch is compared too when the lease knows it. It
/// does not when the `Locker` arms the release of an attempt that was not answered (cancelled,
/// or timed out after the write may have landed): that lease carries fencing token 0, which no
/// grant has (epochs start at 1), and its release must free the grant it cannot see the epoch
/// of (issue 46: such a grant was left held for a whole lease).
fn same_grant(body: &Body, lease: &Lease) -> bool {
    lease.fencing_token() == 0 || body.epoch == lease.fencing_token()
}

/// Renews `lease` for `ttl` from now: the new validity, or `None` when it is no longer ours.
pub(crate) async fn extend(
    lock: &Shared,
    lease: &Lease,
    ttl: Duration,
) -> Result<Option<Instant>, LockError> {
    let done = rewrite(lock, lease, Op::Extend, |b| b.renewed(ttl)).await?;
    Ok(done.map(|(_, started, _)| valid_until(started, ttl.saturating_sub(lock.drift(ttl)))))
}

/// Releases `lease`: the object is rewritten without a holder (its epoch kept), never deleted.
pub(crate) async fn release(lock: &Shared, lease: &Lease) -> Result<bool, LockError> {
    let done = rewrite(lock, lease, Op::Release, Body::released).await?;
    let key = lock.objects.key(lease.name());
    lock.held.forget(&key, lease.token());
    let released = done.is_some();
    if let Some((body, _, version)) = done {
        lock.held.put_released(&key, version, body);
    }
    Ok(released)
}

/// Writes `note` beside `lease`'s grant.
pub(crate) async fn annotate(lock: &Shared, lease: &Lease, note: &[u8]) -> Result<bool, LockError> {
    let done = rewrite(lock, lease, Op::Extend, |b| b.annotated(note)).await?;
    Ok(done.is_some())
}

/// Passes `lease` on to `to` for `ttl` in one conditional write (a new grant: epoch + 1).
pub(crate) async fn hand_over(
    lock: &Shared,
    lease: &Lease,
    to: Token,
    ttl: Duration,
) -> Result<Handover, LockError> {
    let to_hex = to.to_hex();
    let done = rewrite(lock, lease, Op::Acquire, |b| {
        b.granted(to_hex.as_str(), ttl)
    })
    .await?;
    let Some((body, started, _)) = done else {
        return Ok(Handover::NotOwned);
    };
    let key = lock.objects.key(lease.name());
    if let Some(version) = lock.held.get(&key, lease.token()).map(|(v, _)| v) {
        lock.held.put(&key, &to, version, body.clone());
    }
    let valid = valid_until(started, ttl.saturating_sub(lock.drift(ttl)));
    Ok(Handover::Handed(Lease::new(
        lease.name(),
        to,
        body.epoch,
        valid,
    )))
}
