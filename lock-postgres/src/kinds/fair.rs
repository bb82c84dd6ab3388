//! The fair lock: the mutex of the same name (its row in `distlock_leases`, the anchor), granted
//! only to the head of the name's queue in `distlock_fair_queue`. A release tells the new head
//! alone, on the turn channel with its token as the payload.

use std::time::Duration;

use lock_core::backend::Attempt;
use lock_core::{Kind, Lease, LockError, Op, Token, fair_entry_ttl, valid_until};
use tokio::time::Instant;
use tokio_postgres::types::Type;

use super::{Release, attempt, first_is_true, left_behind, name_and_token, run_release};
use crate::executor::{Executor, millis};
use crate::grant::{GrantStatement, param};
use crate::sql::{CHANNEL, TURN_CHANNEL};

/// `distlock_fair_acquire(name, token, ttl_ms, entry_ms)`.
const FAIR_ACQUIRE: &str =
    "SELECT granted, fencing_token, wait_ms FROM distlock_fair_acquire($1, $2, $3, $4)";

/// `distlock_fair_release(name, token, channel, turn_channel)`: the holder's release or a
/// waiter's withdrawal; `true` when the lock was the token's.
const FAIR_RELEASE: &str = "SELECT distlock_fair_release($1, $2, $3, $4)";

/// One attempt at the fair lock `name`; a `queued` attempt that finds it busy takes (or
/// keeps) a place in the queue: one call of `distlock_fair_acquire`.
pub(crate) async fn try_acquire(
    exec: &Executor,
    name: &str,
    queued: bool,
    token: Token,
    ttl_ms: u64,
) -> Result<Attempt, LockError> {
    let kind = Kind::Fair { queued };
    let entry_ms = if queued {
        u64::try_from(fair_entry_ttl(Duration::from_millis(ttl_ms)).as_millis()).unwrap_or(u64::MAX)
    } else {
        0
    };
    let hex = token.to_hex().as_str().to_owned();
    let started = Instant::now();
    let rows = exec
        .grant(GrantStatement {
            op: Op::Acquire,
            sql: FAIR_ACQUIRE,
            params: vec![
                param(name.to_owned(), Type::TEXT),
                param(hex.clone(), Type::TEXT),
                param(millis(ttl_ms), Type::INT8),
                param(millis(entry_ms), Type::INT8),
            ],
            left_behind: left_behind(kind),
            name: name.to_owned(),
            undo: release_statement(name, &hex),
        })
        .await?;
    let valid = valid_until(started, Duration::from_millis(ttl_ms));
    attempt(&rows, name, kind, token, valid)
}

/// Releases the fair lock `lease` (or withdraws its waiter's place): one call of
/// `distlock_fair_release`, which tells the queue's new head alone, on the turn channel.
pub(crate) async fn release(exec: &Executor, lease: &Lease) -> Result<bool, LockError> {
    let statement = release_statement(lease.name(), lease.token().to_hex().as_str());
    run_release(exec, statement, first_is_true).await
}

/// The release of the fair lock `name` by `hex`.
fn release_statement(name: &str, hex: &str) -> Release {
    let mut params = name_and_token(name, hex);
    params.push(param(CHANNEL, Type::TEXT));
    params.push(param(TURN_CHANNEL, Type::TEXT));
    (FAIR_RELEASE, params)
}
