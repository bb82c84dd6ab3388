//! The mutex: one holder, its token under the lock key (the layout redis-py, node-redlock and
//! redsync share), a fencing token from `lua/acquire.lua`, or one plain `SET NX` without fencing.
//! The fair lock's lease is a mutex lease too, extended here.

use std::time::Duration;

use lock_core::backend::{Attempt, Handover};
use lock_core::{Lease, LockError, Op, Token, valid_until};
use tokio::time::Instant;

use super::{Grants, confirm_grant, unexpected};
use crate::conn::Conn;
use crate::executor::Executor;
use crate::layout::{Keys, announces, token_value};
use crate::scripts::{ACQUIRE, EXTEND, HANDOVER};

/// What an acquire attempt's reply said, fenced or not.
enum AcquireReply {
    /// Ours, with this fencing token (0 without fencing).
    Granted(u64),
    /// Held by another, for this long if the reply said; `announces` when that holder is a
    /// distlock holder, which announces its release.
    Busy {
        holder_ttl: Option<Duration>,
        announces: bool,
    },
}

/// One attempt at the mutex `name` (at `keys`) for `ttl_ms`: the fenced acquire script, or a
/// plain `SET NX` without fencing.
pub(crate) async fn try_acquire(
    exec: &Executor,
    grants: &Grants,
    keys: &Keys,
    name: &str,
    token: Token,
    ttl_ms: u64,
) -> Result<Attempt, LockError> {
    let key = keys.key();
    let started = Instant::now();
    let value = token_value(&token);
    let (reply, mut conn) = if grants.fencing {
        let fence = keys.fence();
        let (ttl_arg, retention_arg) = (ttl_ms.to_string(), grants.fence_retention_ms.to_string());
        let described = grants.holder.as_ref().map(|h| h.of(value.as_str()));
        let mut args = vec![value.as_str(), &ttl_arg, &retention_arg];
        args.extend(described.as_deref());
        let (answer, conn) = exec
            .run::<Vec<i64>>(Op::Acquire, &ACQUIRE, &[key, &fence], &args)
            .await?;
        let reply = match answer[..] {
            [1, fence] => AcquireReply::Granted(u64::try_from(fence).unwrap_or(0)),
            // PTTL: -1 when the key has no expiry (not a lock we know), else ms left.
            [_, pttl, announces] => AcquireReply::Busy {
                holder_ttl: u64::try_from(pttl).ok().map(Duration::from_millis),
                announces: announces == 1,
            },
            _ => return Err(unexpected(format!("unexpected acquire reply {answer:?}"))),
        };
        (reply, conn)
    } else {
        // Without fencing the script has nothing to add to one `SET NX`: a plain command
        // saves the server the script call (~10,000 instructions and ~1,500 per argument).
        let mut set = redis::Cmd::with_capacity(7, key.len() + 64);
        set.arg("SET")
            .arg(key)
            .arg(value.as_str())
            .arg("NX")
            .arg("PX")
            .arg(ttl_ms)
            .arg("GET");
        let (holder, conn) = exec.send::<Option<Vec<u8>>>(Op::Acquire, &set, key).await?;
        // nil: ours, with no fencing token. A holder's token: busy, for how long unknown.
        let reply = match holder {
            None => AcquireReply::Granted(0),
            Some(holder) => {
                let announces = announces(&holder);
                if announces {
                    // The holder's TTL is unknown here; a waiter polls within this request's
                    // TTL, and marks again on each busy answer.
                    exec.mark_waiting(keys, Duration::from_millis(ttl_ms)).await;
                }
                AcquireReply::Busy {
                    holder_ttl: None,
                    announces,
                }
            }
        };
        (reply, conn)
    };
    match reply {
        AcquireReply::Granted(fencing_token) => {
            let valid = valid_until(started, Duration::from_millis(ttl_ms));
            let lease = Lease::new(name, token, fencing_token, valid);
            confirm_grant(exec, &mut conn, keys.key(), || {
                release(exec, grants, keys, &lease)
            })
            .await?;
            Ok(Attempt::Acquired(lease))
        }
        AcquireReply::Busy {
            holder_ttl,
            announces,
        } => Ok(Attempt::Busy {
            holder_ttl,
            announces,
        }),
    }
}

/// Extends the mutex (or fair) `lease` to `ttl_ms` from now if its key still holds its token:
/// `lua/extend.lua`, a compare-and-pexpire.
pub(crate) async fn extend(
    exec: &Executor,
    grants: &Grants,
    keys: &Keys,
    lease: &Lease,
    ttl_ms: u64,
) -> Result<Option<Instant>, LockError> {
    let key = keys.key();
    let started = Instant::now();
    let (value, ttl_arg) = (token_value(lease.token()), ttl_ms.to_string());
    let holder = grants.holder.as_ref().map(|_| keys.holder());
    let mut args = vec![value.as_str(), &ttl_arg];
    args.extend(holder.as_deref());
    let (extended, mut conn): (i64, Conn) = exec.run(Op::Extend, &EXTEND, &[key], &args).await?;
    if extended != 1 {
        return Ok(None);
    }
    exec.confirm(&mut conn, key, Op::Extend).await?;
    Ok(Some(valid_until(started, Duration::from_millis(ttl_ms))))
}

/// One EVALSHA of `lua/handover.lua`: compare the token, store the next holder's with
/// `ttl_ms`, issue a fencing token (unless built with `fencing(false)`).
pub(crate) async fn hand_over(
    exec: &Executor,
    grants: &Grants,
    keys: &Keys,
    lease: &Lease,
    to: Token,
    ttl_ms: u64,
) -> Result<Handover, LockError> {
    let key = keys.key();
    let started = Instant::now();
    let (from, to_value) = (token_value(lease.token()), token_value(&to));
    let (ttl_arg, retention_arg) = (ttl_ms.to_string(), grants.fence_retention_ms.to_string());
    let fence = if grants.fencing {
        keys.fence()
    } else {
        String::new()
    };
    let described = grants.holder.as_ref().map(|h| h.of(to_value.as_str()));
    let (script_keys, args): (&[&str], Vec<&str>) = if grants.fencing {
        let mut args = vec![from.as_str(), to_value.as_str(), &ttl_arg, &retention_arg];
        args.extend(described.as_deref());
        (&[key, &fence], args)
    } else {
        (&[key], vec![from.as_str(), to_value.as_str(), &ttl_arg])
    };
    let ((handed, fencing_token), mut conn): ((i64, i64), Conn) =
        exec.run(Op::Acquire, &HANDOVER, script_keys, &args).await?;
    if handed != 1 {
        return Ok(Handover::NotOwned);
    }
    let fencing_token = u64::try_from(fencing_token).unwrap_or(0);
    let valid = valid_until(started, Duration::from_millis(ttl_ms));
    let next = Lease::new(lease.name(), to, fencing_token, valid);
    confirm_grant(exec, &mut conn, keys.key(), || {
        release(exec, grants, keys, &next)
    })
    .await?;
    Ok(Handover::Handed(next))
}

/// Releases the mutex `lease` if its key still holds its token, announcing the release.
pub(crate) async fn release(
    exec: &Executor,
    grants: &Grants,
    keys: &Keys,
    lease: &Lease,
) -> Result<bool, LockError> {
    let value = token_value(lease.token());
    let channel = keys.released();
    let holder = grants.holder.as_ref().map(|_| keys.holder());
    let mut args = vec![value.as_str(), &channel];
    args.extend(holder.as_deref());
    let (released, _): (i64, Conn) = exec
        .run(Op::Release, grants.releases.mutex, &[keys.key()], &args)
        .await?;
    Ok(released == 1)
}

/// Releases the mutex at `keys` if its key still holds `token_value`, whoever wrote it: the
/// release of an operator who read the token (see `RedisLock::release_token`).
pub(crate) async fn release_value(
    exec: &Executor,
    grants: &Grants,
    keys: &Keys,
    token_value: &str,
) -> Result<bool, LockError> {
    let (channel, holder) = (keys.released(), keys.holder());
    // The holder's description goes with the lock, whoever wrote it.
    let (released, _conn): (i64, _) = exec
        .run(
            Op::Release,
            grants.releases.mutex,
            &[keys.key()],
            &[token_value, &channel, &holder],
        )
        .await?;
    Ok(released == 1)
}
