//! The read-write lock: readers in a sorted set scored by expiry, the writer's token under a
//! key of its own (like a mutex key), waiting writers in a sorted set; the writer takes a
//! fencing token from the name's counter, readers carry the last write's.

use std::time::Duration;

use lock_core::backend::Attempt;
use lock_core::{Kind, Lease, LockError, Op, Token, valid_until};
use tokio::time::Instant;

use super::{Grants, flag, read_reply, settle_reply};
use crate::connection::conn::Conn;
use crate::executor::Executor;
use crate::layout::{Keys, token_value};
use crate::scripts::{EXTEND, READ_ACQUIRE, READ_EXTEND, WRITE_ACQUIRE};

/// One attempt at a read share or the write lock of `name` (`kind` is `Read` or `Write`) for
/// `ttl_ms`: one EVALSHA of `lua/read_acquire.lua` or `lua/write_acquire.lua`.
pub(crate) async fn try_acquire(
    exec: &Executor,
    grants: &Grants,
    keys: &Keys,
    name: &str,
    kind: Kind,
    token: Token,
    ttl_ms: u64,
) -> Result<Attempt, LockError> {
    let write = kind.is_exclusive();
    let writer_preference = matches!(
        kind,
        Kind::Read {
            writer_preference: true
        } | Kind::Write {
            writer_preference: true
        }
    );
    let started = Instant::now();
    let value = token_value(&token);
    let ttl_arg = ttl_ms.to_string();
    let [writer, readers, waiting] = keys.read_write();
    let fence = keys.fence();
    let script_keys = [writer.as_str(), &readers, &waiting, &fence];
    let (answer, mut conn): (Vec<i64>, Conn) = if write {
        let retention = grants.fence_retention_ms.to_string();
        exec.run(
            Op::Acquire,
            &WRITE_ACQUIRE,
            &script_keys,
            &[
                value.as_str(),
                &ttl_arg,
                flag(writer_preference),
                &retention,
            ],
        )
        .await?
    } else {
        exec.run(
            Op::Acquire,
            &READ_ACQUIRE,
            &script_keys,
            &[value.as_str(), &ttl_arg, flag(writer_preference)],
        )
        .await?
    };
    let valid = valid_until(started, Duration::from_millis(ttl_ms));
    let reply = read_reply(&answer, name, token, kind, valid)?;
    settle_reply(exec, &mut conn, keys.key(), reply, |lease| async move {
        release(exec, grants, keys, &lease).await
    })
    .await
}

/// Extends a reader's share (`lua/read_extend.lua`) or the write lock (the mutex's
/// compare-and-pexpire on the writer key), touching no one else's expiry.
pub(crate) async fn extend(
    exec: &Executor,
    keys: &Keys,
    lease: &Lease,
    ttl_ms: u64,
) -> Result<Option<Instant>, LockError> {
    let started = Instant::now();
    let (value, ttl_arg) = (token_value(lease.token()), ttl_ms.to_string());
    let args = [value.as_str(), ttl_arg.as_str()];
    let [writer, readers, _] = keys.read_write();
    let (extended, mut conn): (i64, Conn) = if lease.kind().is_exclusive() {
        // The writer key holds the token like a mutex's key: the same compare-and-pexpire.
        exec.run(Op::Extend, &EXTEND, &[&writer], &args).await?
    } else {
        exec.run(Op::Extend, &READ_EXTEND, &[&readers], &args)
            .await?
    };
    if extended != 1 {
        return Ok(None);
    }
    exec.confirm(&mut conn, keys.key(), Op::Extend).await?;
    Ok(Some(valid_until(started, Duration::from_millis(ttl_ms))))
}

/// Releases a reader's share or the write lock (or withdraws a waiting writer's record),
/// announcing it when it may let a waiter in: `lua/rw_release.lua`.
pub(crate) async fn release(
    exec: &Executor,
    grants: &Grants,
    keys: &Keys,
    lease: &Lease,
) -> Result<bool, LockError> {
    let value = token_value(lease.token());
    let channel = keys.released();
    let [writer, readers, waiting] = keys.read_write();
    let role = if lease.kind().is_exclusive() {
        "w"
    } else {
        "r"
    };
    let (released, _): (i64, Conn) = exec
        .run(
            Op::Release,
            grants.releases.read_write,
            &[&writer, &readers, &waiting],
            &[value.as_str(), role, &channel],
        )
        .await?;
    Ok(released == 1)
}
