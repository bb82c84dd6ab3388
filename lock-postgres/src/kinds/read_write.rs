//! The read-write lock: the writer and the last write's fencing token in `distlock_rw` (one row
//! per name, the anchor), a row per reader in `distlock_rw_readers` and a record per waiting
//! writer in `distlock_rw_waiting`.

use std::time::Duration;

use lock_core::backend::Attempt;
use lock_core::{Kind, Lease, LockError, Op, Token, valid_until};
use tokio::time::Instant;
use tokio_postgres::types::Type;

use super::{Release, attempt, first_is_true, left_behind, name_and_token, run_release};
use crate::executor::{Executor, millis};
use crate::grant::{GrantStatement, param};
use crate::sql::CHANNEL;

/// `distlock_read_acquire(name, token, ttl_ms, writer_preference)`.
const READ_ACQUIRE: &str =
    "SELECT granted, fencing_token, wait_ms FROM distlock_read_acquire($1, $2, $3, $4)";

/// `distlock_write_acquire(name, token, ttl_ms, writer_preference)`.
const WRITE_ACQUIRE: &str =
    "SELECT granted, fencing_token, wait_ms FROM distlock_write_acquire($1, $2, $3, $4)";

/// `distlock_rw_release(name, token, writer, channel)`: a reader's or the writer's release, or
/// a waiting writer's withdrawal; `true` when the lease was ours.
const RW_RELEASE: &str = "SELECT distlock_rw_release($1, $2, $3, $4)";

/// One attempt at a reader's share ([`Kind::Read`]) or the writer's lock of `name`: one
/// call of `distlock_read_acquire` / `distlock_write_acquire`.
pub(crate) async fn try_acquire(
    exec: &Executor,
    name: &str,
    kind: Kind,
    token: Token,
    ttl_ms: u64,
) -> Result<Attempt, LockError> {
    let (sql, preference) = match kind {
        Kind::Read { writer_preference } => (READ_ACQUIRE, writer_preference),
        Kind::Write { writer_preference } => (WRITE_ACQUIRE, writer_preference),
        other => {
            return Err(LockError::Unsupported {
                backend: crate::error::BACKEND,
                kind: other.label(),
            });
        }
    };
    let hex = token.to_hex().as_str().to_owned();
    let started = Instant::now();
    let rows = exec
        .grant(GrantStatement {
            op: Op::Acquire,
            sql,
            params: vec![
                param(name.to_owned(), Type::TEXT),
                param(hex.clone(), Type::TEXT),
                param(millis(ttl_ms), Type::INT8),
                param(preference, Type::BOOL),
            ],
            left_behind: left_behind(kind),
            name: name.to_owned(),
            undo: release_statement(name, &hex, kind),
        })
        .await?;
    let valid = valid_until(started, Duration::from_millis(ttl_ms));
    attempt(&rows, name, kind, token, valid)
}

/// Releases the reader's share or the writer's lock `lease` (or withdraws a waiting writer's
/// record): one call of `distlock_rw_release`.
pub(crate) async fn release(exec: &Executor, lease: &Lease) -> Result<bool, LockError> {
    let statement = release_statement(lease.name(), lease.token().to_hex().as_str(), lease.kind());
    run_release(exec, statement, first_is_true).await
}

/// The release of `name` by `hex`, held as a reader or (for [`Kind::Write`]) the writer.
fn release_statement(name: &str, hex: &str, kind: Kind) -> Release {
    let writer = matches!(kind, Kind::Write { .. });
    let mut params = name_and_token(name, hex);
    params.push(param(writer, Type::BOOL));
    params.push(param(CHANNEL, Type::TEXT));
    (RW_RELEASE, params)
}
