//! The semaphore: holders in a sorted set scored by expiry, their permits and the semaphore's
//! size in a hash; `lua/semaphore.lua` prunes expired holders in front of every script.

use std::time::Duration;

use lock_core::backend::Attempt;
use lock_core::{Kind, Lease, LockError, Op, Token, valid_until};
use tokio::time::Instant;

use super::{Grants, read_reply, settle_reply};
use crate::connection::conn::Conn;
use crate::executor::Executor;
use crate::layout::{Keys, token_value};
use crate::scripts::{SEMAPHORE_ACQUIRE, SEMAPHORE_EXTEND, SEMAPHORE_IN_USE};

/// One attempt at `permits` of the `max` permits of the semaphore `name` for `ttl_ms`, all or
/// none: one EVALSHA of `lua/semaphore_acquire.lua`.
#[allow(clippy::too_many_arguments)] // the kind's two numbers, spelled out
pub(crate) async fn try_acquire(
    exec: &Executor,
    grants: &Grants,
    keys: &Keys,
    name: &str,
    permits: u32,
    max: u32,
    token: Token,
    ttl_ms: u64,
) -> Result<Attempt, LockError> {
    let kind = Kind::Semaphore { permits, max };
    let started = Instant::now();
    let value = token_value(&token);
    let [holders, counts] = keys.semaphore();
    let (answer, mut conn): (Vec<i64>, Conn) = exec
        .run(
            Op::Acquire,
            &SEMAPHORE_ACQUIRE,
            &[&holders, &counts],
            &[
                value.as_str(),
                &permits.to_string(),
                &max.to_string(),
                &ttl_ms.to_string(),
            ],
        )
        .await?;
    let valid = valid_until(started, Duration::from_millis(ttl_ms));
    let reply = read_reply(&answer, name, token, kind, valid)?;
    settle_reply(exec, &mut conn, keys.key(), reply, |lease| async move {
        release(exec, grants, keys, &lease).await
    })
    .await
}

/// Extends a holder's permits, touching no one else's expiry: `lua/semaphore_extend.lua`.
pub(crate) async fn extend(
    exec: &Executor,
    keys: &Keys,
    lease: &Lease,
    ttl_ms: u64,
) -> Result<Option<Instant>, LockError> {
    let started = Instant::now();
    let (value, ttl_arg) = (token_value(lease.token()), ttl_ms.to_string());
    let [holders, counts] = keys.semaphore();
    let (extended, mut conn): (i64, Conn) = exec
        .run(
            Op::Extend,
            &SEMAPHORE_EXTEND,
            &[&holders, &counts],
            &[value.as_str(), ttl_arg.as_str()],
        )
        .await?;
    if extended != 1 {
        return Ok(None);
    }
    exec.confirm(&mut conn, keys.key(), Op::Extend).await?;
    Ok(Some(valid_until(started, Duration::from_millis(ttl_ms))))
}

/// Gives a holder's permits back, announcing it: `lua/semaphore_release.lua`.
pub(crate) async fn release(
    exec: &Executor,
    grants: &Grants,
    keys: &Keys,
    lease: &Lease,
) -> Result<bool, LockError> {
    let value = token_value(lease.token());
    let channel = keys.released();
    let [holders, counts] = keys.semaphore();
    let (released, _): (i64, Conn) = exec
        .run(
            Op::Release,
            grants.releases.semaphore,
            &[&holders, &counts],
            &[value.as_str(), &channel],
        )
        .await?;
    Ok(released == 1)
}

/// The permits of the semaphore at `keys` in use, after pruning expired holders.
pub(crate) async fn in_use(exec: &Executor, keys: &Keys) -> Result<u32, LockError> {
    let [holders, counts] = keys.semaphore();
    let (used, _): (i64, Conn) = exec
        .run(
            Op::Acquire,
            &SEMAPHORE_IN_USE,
            &[&holders, &counts],
            &[] as &[&str],
        )
        .await?;
    Ok(u32::try_from(used).unwrap_or(0))
}
