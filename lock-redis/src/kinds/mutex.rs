//! The mutex: one holder, its token under the lock key (the layout redis-py, node-redlock and
//! redsync share), a fencing token from `lua/acquire.lua`, or one plain `SET NX` without fencing.
//! The fair lock's lease is a mutex lease too, extended here.

use std::time::Duration;

use lock_core::backend::{Attempt, Handover};
use lock_core::{Lease, LockError, Op, Token, valid_until};
use tokio::time::Instant;

use super::{Grants, confirm_grant, unexpected};
use crate::connection::conn::Conn;
use crate::executor::{Executor, evalsha};
use crate::layout::{Keys, announces, token_value};
use crate::scripts::native;
use crate::scripts::{ACQUIRE, EXTEND, HANDOVER};
use crate::topology::Topology;

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
    let started = Instant::now();
    let value = token_value(&token);
    // Each way of asking in an `async fn` of its own: the attempt's future (boxed and
    // allocated on every attempt) then holds the larger of the two, not both.
    let (reply, mut conn) = if grants.fencing {
        ask_fenced(exec, grants, keys, value.as_str(), ttl_ms).await?
    } else {
        ask_plain(exec, keys, value.as_str(), ttl_ms).await?
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

/// The fenced attempt: `lua/acquire.lua` (grant with a fencing token, or mark the waiter). Its
/// EVALSHA is written here, numbers and all, rather than from strings through
/// [`Executor::run`]: the strings would live across the round trip in the attempt's future.
async fn ask_fenced(
    exec: &Executor,
    grants: &Grants,
    keys: &Keys,
    value: &str,
    ttl_ms: u64,
) -> Result<(AcquireReply, Conn), LockError> {
    let key = keys.key();
    let fence = keys.fence();
    let described = grants.holder.as_ref().map(|h| h.of(value));
    let arg_bytes = value.len() + described.as_ref().map_or(0, String::len) + 40;
    let mut call = evalsha(&ACQUIRE, &[key, &fence], 4, arg_bytes);
    call.arg(value).arg(ttl_ms).arg(grants.fence_retention_ms);
    if let Some(described) = &described {
        call.arg(described);
    }
    drop((fence, described));
    let (answer, conn) = exec
        .eval::<redis::Value>(Op::Acquire, &ACQUIRE, &call, key)
        .await?;
    // Granted: the fencing token alone. Busy: the holder's PTTL and whether it announces.
    let reply = match &answer {
        redis::Value::Int(fence) => AcquireReply::Granted(u64::try_from(*fence).unwrap_or(0)),
        redis::Value::Array(busy) => match busy[..] {
            // PTTL: -1 when the key has no expiry (not a lock we know), else ms left.
            [redis::Value::Int(pttl), redis::Value::Int(announces)] => AcquireReply::Busy {
                holder_ttl: u64::try_from(pttl).ok().map(Duration::from_millis),
                announces: announces == 1,
            },
            _ => return Err(unexpected(format!("unexpected acquire reply {answer:?}"))),
        },
        _ => return Err(unexpected(format!("unexpected acquire reply {answer:?}"))),
    };
    Ok((reply, conn))
}

/// The attempt without fencing: one `SET NX PX GET`, then, when a distlock holder has the lock,
/// the waiting mark. The script would add nothing to one `SET NX`, and a plain command saves the
/// server the script call (~10,000 instructions and ~1,500 per argument).
async fn ask_plain(
    exec: &Executor,
    keys: &Keys,
    value: &str,
    ttl_ms: u64,
) -> Result<(AcquireReply, Conn), LockError> {
    let key = keys.key();
    let mut set = redis::Cmd::with_capacity(7, key.len() + 64);
    set.arg("SET")
        .arg(key)
        .arg(value)
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
                // The holder's TTL is unknown here; a waiter polls within this request's TTL,
                // and marks again on each busy answer. Boxed: only a busy answer marks, and
                // inline the mark would grow the future every attempt allocates.
                Box::pin(exec.mark_waiting(keys, Duration::from_millis(ttl_ms), &holder)).await;
            }
            AcquireReply::Busy {
                holder_ttl: None,
                announces,
            }
        }
    };
    Ok((reply, conn))
}

/// Extends the mutex (or fair) `lease` to `ttl_ms` from now if its key still holds its token:
/// `SET key token IFEQ token PX ttl` where the server has it and the lease has no holder
/// description (whose note must expire with it), else `lua/extend.lua`, a compare-and-pexpire.
pub(crate) async fn extend(
    exec: &Executor,
    grants: &Grants,
    keys: &Keys,
    lease: &Lease,
    ttl_ms: u64,
) -> Result<Option<Instant>, LockError> {
    let key = keys.key();
    let started = Instant::now();
    let value = token_value(lease.token());
    if grants.holder.is_none() && exec.may_go_native(native::Command::Extend) {
        let mut pipe = redis::pipe();
        pipe.ignore_errors()
            .cmd("SET")
            .arg(key)
            .arg(value.as_str())
            .arg("IFEQ")
            .arg(value.as_str())
            .arg("PX")
            .arg(ttl_ms);
        if let Some((replies, mut conn)) = exec
            .native(native::Command::Extend, Op::Extend, &pipe, key)
            .await?
        {
            // OK: ours, and now expiring `ttl_ms` from now. Nil: not ours (absent or another
            // token), left untouched.
            match single_reply(replies, key, Op::Extend)? {
                redis::Value::Okay => {}
                redis::Value::Nil => return Ok(None),
                other => return Err(unexpected(format!("unexpected extend reply {other:?}"))),
            }
            exec.confirm(&mut conn, key, Op::Extend).await?;
            return Ok(Some(valid_until(started, Duration::from_millis(ttl_ms))));
        }
    }
    let ttl_arg = ttl_ms.to_string();
    // The description the grant wrote (its note) expires with the lease.
    let holder = grants.holder.as_ref().map(|_| keys.note());
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
    let mark = keys.released();
    let (script_keys, args): (&[&str], Vec<&str>) = if grants.fencing {
        let mut args = vec![
            from.as_str(),
            to_value.as_str(),
            &ttl_arg,
            &mark,
            &retention_arg,
        ];
        args.extend(described.as_deref());
        (&[key, &fence], args)
    } else {
        (
            &[key],
            vec![from.as_str(), to_value.as_str(), &ttl_arg, &mark],
        )
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

/// Releases the mutex `lease` if its key still holds its token, announcing the release when a
/// distlock waiter marked that it waits: natively where the server has `DELIFEQ` and the
/// lease has no holder description (see [`release_natively`]), else by `lua/release.lua`.
pub(crate) async fn release(
    exec: &Executor,
    grants: &Grants,
    keys: &Keys,
    lease: &Lease,
) -> Result<bool, LockError> {
    let value = token_value(lease.token());
    let channel = keys.released();
    if grants.holder.is_none()
        && exec.may_go_native(native::Command::Release)
        && let Some(released) = release_natively(exec, keys, value.as_str(), &channel).await?
    {
        return Ok(released);
    }
    // The description the grant wrote (its note) goes with the lock.
    let holder = grants.holder.as_ref().map(|_| keys.note());
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
    let (channel, note) = (keys.released(), keys.note());
    // The holder's description (its note) goes with the lock, whoever wrote it.
    let (released, _conn): (i64, _) = exec
        .run(
            Op::Release,
            grants.releases.mutex,
            &[keys.key()],
            &[token_value, &channel, &note],
        )
        .await?;
    Ok(released == 1)
}

/// The native release: `DELIFEQ key token` and `DELIFEQ mark token` in one pipeline (one round
/// trip), then, only when the mark was there, the announcement (a second round trip, paid only
/// when someone waits). `None` when the server refused `DELIFEQ`: nothing was done, the caller
/// runs the script.
///
/// The waiting mark holds the token of the holder its waiter found busy (`lua/acquire.lua`,
/// [`Executor::mark_waiting`]), so the second `DELIFEQ` deletes only a mark left by this
/// holder's own waiters, never one left for a later holder. The two commands are not one atomic
/// step, as the script is; what may run between or after them, with a waiter W that subscribes
/// before it tries again, tries again after subscribing, and marks on every busy answer:
///
/// 1. W marked (token t) before the first `DELIFEQ`: the second deletes the mark and we
///    announce after it. W subscribed before the attempt that marked, so it hears us.
/// 2. The lock is freed by the first `DELIFEQ`; a new holder H2 (token t2) takes it and W marks
///    for H2 (the mark now holds t2) before the second: it does not match t, is left alone, and
///    nothing is announced. Nothing is lost: the lock is held again, and H2's release finds t2
///    and announces to W. (The script deletes any mark and announces; W then tries, finds H2,
///    and marks again: the same end, one wake-up later.)
/// 3. W found t busy but its mark lands after both `DELIFEQ`s (the unfenced path marks in a
///    second command): the mark names a holder that is gone, nobody announces, and W sleeps
///    until its own retry (bounded by the holder's TTL). The script release has the same
///    window, as the mark comes after the busy answer there too; the fenced acquire script,
///    which marks in the same atomic step as its busy answer, has none.
/// 4. The lock was no longer ours (expired, and maybe taken) but our waiters' mark is still
///    there: it is deleted, and we announce anyway (cheap, rare), so those waiters try again at
///    once.
///
/// A mark left by a distlock version that marked with `1` is not ours to delete here: its
/// waiters are woken by their retry within the holder's TTL instead of at once.
async fn release_natively(
    exec: &Executor,
    keys: &Keys,
    value: &str,
    channel: &str,
) -> Result<Option<bool>, LockError> {
    let key = keys.key();
    // Each command built at its final size: grown an argument at a time, the two commands'
    // buffers were reallocated on every release (~2,400 of the ~5,000 instructions a native
    // cycle cost the client over the script's one EVALSHA; `SERVER=valkey bash
    // scripts/client-cost.sh`: 41,128 → 38,660 per unfenced cycle).
    let delifeq = |key: &str| {
        let mut cmd = redis::Cmd::with_capacity(3, 7 + key.len() + value.len());
        cmd.arg("DELIFEQ").arg(key).arg(value);
        cmd
    };
    let mut pipe = redis::Pipeline::with_capacity(2);
    pipe.ignore_errors()
        .add_command(delifeq(key))
        .add_command(delifeq(channel));
    let Some((mut replies, mut conn)) = exec
        .native(native::Command::Release, Op::Release, &pipe, key)
        .await?
    else {
        return Ok(None);
    };
    let mark = replies.pop();
    let released = match single_reply(replies, key, Op::Release)? {
        redis::Value::Int(n) => n == 1,
        other => return Err(unexpected(format!("unexpected release reply {other:?}"))),
    };
    // 1: our waiters' mark, deleted. An error (a slot migrating on a Cluster refuses a key not
    // on this node): someone may wait, announce as the script does.
    let waited = !matches!(mark, Some(redis::Value::Int(0)));
    if waited {
        let publish = if exec.topology() == Topology::Cluster {
            "SPUBLISH"
        } else {
            "PUBLISH"
        };
        let mut announce = redis::Cmd::with_capacity(3, channel.len() + 16);
        announce.arg(publish).arg(channel).arg("");
        // The lock is released whatever happens to the announcement: a waiter that misses it
        // tries again within the holder's TTL, so a failure is logged, not returned.
        let sent = tokio::time::timeout(
            exec.command_timeout(),
            announce.query_async::<()>(&mut conn.conn),
        )
        .await;
        if !matches!(sent, Ok(Ok(()))) {
            tracing::debug!("announcing a native release failed; waiters will poll");
        }
    }
    Ok(Some(released))
}

/// The only reply of a one-command answer, an error reply mapped like any failed command.
fn single_reply(replies: Vec<redis::Value>, key: &str, op: Op) -> Result<redis::Value, LockError> {
    match replies.into_iter().next() {
        Some(redis::Value::ServerError(error)) => Err(crate::error::from_redis(
            error.into(),
            op,
            key,
            Duration::ZERO,
        )),
        Some(reply) => Ok(reply),
        None => Err(unexpected("an empty reply".to_owned())),
    }
}
