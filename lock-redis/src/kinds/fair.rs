//! The fair lock: the mutex of the same name, granted to the head of a queue of waiters (two
//! sorted sets: by arrival, by when each entry lapses); a release tells the new head alone, on
//! its own turn channel. Its lease is extended like a mutex lease (`mutex::extend`).

use std::time::Duration;

use lock_core::backend::Attempt;
use lock_core::{Kind, Lease, LockError, Op, Token, fair_entry_ttl, valid_until};
use tokio::time::Instant;

use super::{Grants, read_reply, settle_reply};
use crate::connection::conn::Conn;
use crate::executor::Executor;
use crate::layout::{Keys, token_value};
use crate::scripts::FAIR_ACQUIRE;

/// One attempt at the fair lock `name` for `ttl_ms`; a `queued` attempt that finds it busy
/// takes (or keeps) a place in the queue: one EVALSHA of `lua/fair_acquire.lua`.
pub(crate) async fn try_acquire(
    exec: &Executor,
    grants: &Grants,
    keys: &Keys,
    name: &str,
    queued: bool,
    token: Token,
    ttl_ms: u64,
) -> Result<Attempt, LockError> {
    let kind = Kind::Fair { queued };
    let started = Instant::now();
    let value = token_value(&token);
    let [queue, entries] = keys.fair_queue();
    let fence = keys.fence();
    let entry_ms = if queued {
        fair_entry_ttl(Duration::from_millis(ttl_ms))
            .as_millis()
            .to_string()
    } else {
        "0".to_owned()
    };
    let retention = grants.fence_retention_ms.to_string();
    let (answer, mut conn): (Vec<i64>, Conn) = exec
        .run(
            Op::Acquire,
            &FAIR_ACQUIRE,
            &[keys.key(), &fence, &queue, &entries],
            &[value.as_str(), &ttl_ms.to_string(), &entry_ms, &retention],
        )
        .await?;
    let valid = valid_until(started, Duration::from_millis(ttl_ms));
    let reply = read_reply(&answer, name, token, kind, valid)?;
    settle_reply(exec, &mut conn, keys.key(), reply, |lease| async move {
        release(exec, grants, keys, &lease).await
    })
    .await
}

/// A fair holder's release or a fair waiter's withdrawal, telling the queue's new head on its
/// turn channel: `lua/fair_release.lua`.
pub(crate) async fn release(
    exec: &Executor,
    grants: &Grants,
    keys: &Keys,
    lease: &Lease,
) -> Result<bool, LockError> {
    let value = token_value(lease.token());
    let channel = keys.released();
    let [queue, entries] = keys.fair_queue();
    let (released, _): (i64, Conn) = exec
        .run(
            Op::Release,
            grants.releases.fair,
            &[keys.key(), &queue, &entries],
            &[value.as_str(), &channel, &keys.turn_prefix()],
        )
        .await?;
    Ok(released == 1)
}
