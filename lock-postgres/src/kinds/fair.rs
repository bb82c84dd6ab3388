//! The fair lock: the mutex of the same name (its row in `distlock_leases`, the anchor), granted
//! only to the head of the name's queue in `distlock_fair_queue`. A release tells the new head
//! alone, on the turn channel with its token as the payload.

use std::time::Duration;

use lock_core::backend::Attempt;
use lock_core::{Kind, LockError, Op, Token, fair_entry_ttl, valid_until};
use tokio::time::Instant;
use tokio_postgres::types::Type;

use super::{attempt, left_behind, release_statement};
use crate::executor::{Executor, millis};
use crate::grant::{GrantStatement, param};

/// `distlock_fair_acquire(name, token, ttl_ms, entry_ms)`.
const FAIR_ACQUIRE: &str =
    "SELECT granted, fencing_token, wait_ms FROM distlock_fair_acquire($1, $2, $3, $4)";

/// `distlock_fair_release(name, token, channel, turn_channel)`: the holder's release or a
/// waiter's withdrawal; `true` when the lock was the token's.
pub(crate) const FAIR_RELEASE: &str = "SELECT distlock_fair_release($1, $2, $3, $4)";

/// One attempt at the fair lock `name`; a `queued` attempt that finds it busy takes (or
/// keeps) a place in the queue: one call of `distlock_fair_acquire`.
pub(crate) async fn try_fair(
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
            undo: release_statement(name, &hex, kind),
        })
        .await?;
    let valid = valid_until(started, Duration::from_millis(ttl_ms));
    attempt(&rows, name, kind, token, valid)
}
