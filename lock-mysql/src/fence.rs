//! Guarded writes: the procedure `distlock_fence(resource, token)` that the migration installs
//! (schema version 2), called from Rust inside the transaction of the write it guards. The rule
//! is lock-core's [`Fence`], as in PostgreSQL's `distlock_fence`: a write applies iff its token
//! is ≥ the largest token the resource has accepted, and the record is raised in the same
//! transaction (Kleppmann, "How to do distributed locking", 2016: the store, not the lock,
//! refuses the paused holder).

use lock_core::{Fence, LockError, Op};
use sqlx::MySqlConnection;
use sqlx::mysql::MySqlDatabaseError;

use crate::error::{BACKEND, MissingTable, from_sqlx, number};

/// The SQLSTATE `distlock_fence` signals when the token is smaller than the largest one the
/// resource has accepted: `DL409`, as PostgreSQL's (class `DL`, which neither server uses; 409
/// as HTTP's Conflict). Its message starts `token=<token> current=<record>` and then names the
/// resource (cut at MySQL's 128 characters). [`fence`] turns it into [`LockError::Fenced`].
pub const FENCED_SQLSTATE: &str = "DL409";

/// The table of fence records (schema version 2): one row per fenced resource, `resource
/// VARBINARY(1024)` (primary key), `token BIGINT UNSIGNED` (the largest token accepted) and
/// `updated_at` (when it was last raised or confirmed: µs since the epoch, server clock).
pub const FENCE_TABLE: &str = "distlock_fences";

/// The longest resource name the fence table holds, in bytes.
const MAX_RESOURCE_BYTES: usize = 1024;

/// `ER_SP_DOES_NOT_EXIST`: the procedure is missing (the database is not migrated).
const NO_SUCH_PROCEDURE: u16 = 1305;

/// Checks `fence` in the transaction `conn` is in: admits the write that follows iff
/// `fence.token` is ≥ the largest token `fence.resource` has accepted (equal is accepted), and
/// raises the record to it. Run it as the first statement of the write's transaction (pass a
/// `sqlx::Transaction<'_, MySql>` as `&mut *tx`): the record's row then stays locked until
/// that transaction commits or rolls back, so a concurrent fence of the resource (a newer
/// holder's) waits for it, and a rollback leaves the record as it was. On a connection in
/// autocommit mode the check and the raise commit at once, and nothing guards a later
/// statement.
///
/// This is `CALL distlock_fence(resource, token)`, the procedure
/// [`MIGRATION`](crate::MIGRATION) installs, which clients in any language call the same way.
///
/// # Errors
/// - [`LockError::Fenced`] `{ resource, token, current }` when the token is smaller than the
///   record `current` (SQLSTATE [`FENCED_SQLSTATE`]): nothing is written; roll the transaction
///   back (not retryable: the lease has ended).
/// - [`LockError::InvalidInput`] for an empty resource name or one over 1,024 bytes (before
///   anything is sent).
/// - [`LockError::Backend`] (not retryable) whose source is [`MissingTable`] when
///   `distlock_fence` does not exist: the database is not migrated to version 2 (run
///   [`MysqlLock::migrate`](crate::MysqlLock::migrate), `distlock migrate`, or `MIGRATION`).
/// - [`LockError::Backend`] for any other failure (retryable for I/O, a lost connection, a
///   deadlock or lock wait timeout, as the lock's own statements).
///
/// # Cancel safety
/// Dropping the future may leave the statement running on the server: whether the record was
/// raised is then unknown until the transaction ends. Roll the transaction back and nothing of
/// it applies. Dropping a `sqlx::Transaction` only queues its rollback: begun on a pool
/// (`pool.begin()`), it is sent as the connection goes back to the pool; on a bare
/// connection, only at that connection's next use, and the record's row stays locked until
/// then (every other writer of the resource waits on it).
pub async fn fence(conn: &mut MySqlConnection, fence: &Fence) -> Result<(), LockError> {
    check(fence)?;
    let done = sqlx::query("CALL distlock_fence(?, ?)")
        .bind(fence.resource.as_bytes())
        .bind(fence.token)
        .execute(&mut *conn)
        .await;
    match done {
        Ok(_) => Ok(()),
        Err(err) => Err(refusal(err, fence)),
    }
}

/// Refuses a resource name the fence table cannot hold, before anything is sent.
fn check(fence: &Fence) -> Result<(), LockError> {
    if fence.resource.is_empty() {
        return Err(LockError::invalid("the fenced resource's name is empty"));
    }
    if fence.resource.len() > MAX_RESOURCE_BYTES {
        return Err(LockError::invalid(format!(
            "the fenced resource's name is {} bytes; distlock_fences holds at most {MAX_RESOURCE_BYTES}",
            fence.resource.len()
        )));
    }
    Ok(())
}

/// Maps the server's refusal of `fence` (or any other failure of the call).
fn refusal(err: sqlx::Error, fence: &Fence) -> LockError {
    if let sqlx::Error::Database(db) = &err
        && let Some(mysql) = db.try_downcast_ref::<MySqlDatabaseError>()
        && mysql.code() == Some(FENCED_SQLSTATE)
    {
        return LockError::Fenced {
            resource: fence.resource.clone(),
            token: fence.token,
            current: current(mysql.message()).unwrap_or(fence.token.saturating_add(1)),
        };
    }
    if number(&err) == Some(NO_SUCH_PROCEDURE) {
        return LockError::Backend {
            backend: BACKEND,
            op: Op::Write,
            retryable: false,
            source: Box::new(MissingTable::new(err)),
        };
    }
    from_sqlx(err, Op::Write)
}

/// The recorded token in a refusal's message (`token=5 current=7 refused by ...`).
fn current(message: &str) -> Option<u64> {
    let rest = &message[message.find("current=")? + "current=".len()..];
    rest.split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::{Fence, check, current};

    #[test]
    fn the_refusal_message_gives_the_recorded_token() {
        let message = "token=5 current=17 refused by distlock_fence for resource acct";
        assert_eq!(current(message), Some(17));
        assert_eq!(current("something else"), None);
    }

    #[test]
    fn empty_and_oversized_resources_are_refused_before_sending() {
        assert!(check(&Fence::new("", 1)).is_err());
        assert!(check(&Fence::new("x".repeat(1025), 1)).is_err());
        assert!(check(&Fence::new("x".repeat(1024), 1)).is_ok());
    }
}
