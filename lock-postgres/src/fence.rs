//! Guarded writes: the fence `distlock_fence(resource, token)` that the migration installs
//! (schema version 4), called from Rust inside the transaction of the write it guards, through
//! tokio-postgres ([`fence`]) or sqlx (`fence_sqlx`, feature `sqlx`). The rule is lock-core's
//! [`Fence`]: a write applies iff its token is ≥ the largest token the resource has accepted,
//! and the record is raised in the same transaction (Kleppmann, "How to do distributed
//! locking", 2016: the store, not the lock, refuses the paused holder).

use lock_core::{Fence, LockError, Op};
use tokio_postgres::GenericClient;
use tokio_postgres::types::Type;

use crate::error::{BACKEND, from_pg};

/// The SQLSTATE `distlock_fence` raises when the token is smaller than the largest one the
/// resource has accepted: `DL409` (class `DL`, which PostgreSQL does not use; 409 as HTTP's
/// Conflict). Its message names the resource, the token and the recorded token; its DETAIL is
/// `token=<token> current=<recorded> resource=<resource>` (the resource last, verbatim), for
/// clients that parse it. [`fence`] and `fence_sqlx` (feature `sqlx`) turn it into
/// [`LockError::Fenced`].
pub const FENCED_SQLSTATE: &str = "DL409";

/// The table of fence records (schema version 4): one row per fenced resource, `resource text`
/// (primary key), `token numeric` (the largest token accepted) and `updated_at timestamptz`
/// (when it was last raised or confirmed, on the server's clock).
pub const FENCE_TABLE: &str = "distlock_fences";

/// The SQLSTATE of `distlock_fence`'s refusal of bad input (an empty or NULL resource, a token
/// that is NULL, negative, not an integer or above 2^64 - 1): invalid_parameter_value.
const INVALID_PARAMETER: &str = "22023";

/// The fence, its token as text (a `u64` may not fit PostgreSQL's `int8`; numeric holds it):
/// one statement, one round trip.
const FENCE: &str = "SELECT distlock_fence($1, $2::numeric)::text";

/// Checks `fence` in the transaction `client` is in: admits the write that follows iff
/// `fence.token` is ≥ the largest token `fence.resource` has accepted (equal is accepted),
/// and raises the record to it. Run it as the first statement of the write's transaction
/// (`client` a [`tokio_postgres::Transaction`]): the record's row then stays locked until that
/// transaction commits or rolls back, so a concurrent fence of the resource (a newer holder's)
/// waits for it, and a rollback leaves the record as it was. On a plain [`tokio_postgres::Client`]
/// (autocommit) the check and the raise commit at once, and nothing guards a later statement.
///
/// Through deadpool-postgres (the pool `PostgresLock` is built on), pass the tokio-postgres
/// values its types dereference to: `&**object` for a pooled `Object`, `&*tx` for its
/// `Transaction`.
///
/// This is `SELECT distlock_fence($resource, $token)`, the SQL function
/// [`MIGRATION`](crate::MIGRATION) installs, which clients in any language call the same way.
///
/// # Errors
/// - [`LockError::Fenced`] `{ resource, token, current }` when the token is smaller than the
///   record `current` (SQLSTATE [`FENCED_SQLSTATE`]): nothing is written, and the server has
///   aborted the transaction, which the caller rolls back (not retryable: the lease has ended).
/// - [`LockError::InvalidInput`] for an empty resource name or one with a NUL character
///   (before anything is sent).
/// - [`LockError::Backend`] (not retryable) whose source is [`MissingTable`](crate::MissingTable)
///   when `distlock_fence` does not exist: the database is not migrated to version 4 (run
///   [`PostgresLock::migrate`](crate::PostgresLock::migrate) or `MIGRATION`).
/// - [`LockError::Backend`] for any other failure (retryable for I/O, a closed connection, a
///   serialization failure or deadlock, as the lock's own statements).
///
/// # Cancel safety
/// Dropping the future may leave the statement running on the server: whether the record was
/// raised is then unknown until the transaction ends. Roll the transaction back (dropping a
/// `Transaction` does) and nothing of it applies.
pub async fn fence(client: &impl GenericClient, fence: &Fence) -> Result<(), LockError> {
    check(fence)?;
    let token = fence.token.to_string();
    let params: [(&(dyn tokio_postgres::types::ToSql + Sync), Type); 2] =
        [(&fence.resource, Type::TEXT), (&token, Type::TEXT)];
    match client.query_typed(FENCE, &params).await {
        Ok(_) => Ok(()),
        Err(err) => {
            if let Some(db) = err.as_db_error()
                && let Some(answer) = answer(db.code().code(), db.detail(), db.message(), fence)
            {
                return Err(answer);
            }
            Err(from_pg(err, Op::Acquire))
        }
    }
}

/// Rejects what `distlock_fence` (or PostgreSQL's `text`) would refuse, before a round trip.
fn check(fence: &Fence) -> Result<(), LockError> {
    if fence.resource.is_empty() {
        return Err(LockError::invalid(
            "a fence's resource name is empty: fence a resource by its lock name",
        ));
    }
    if fence.resource.contains('\0') {
        return Err(LockError::invalid(format!(
            "the fence's resource name {:?} contains a NUL character, which PostgreSQL text \
             cannot hold",
            fence.resource
        )));
    }
    Ok(())
}

/// The typed error for the fence's own answers (SQLSTATE `code`): its refusal of a stale token
/// and of bad input. `None` for every other error.
fn answer(code: &str, detail: Option<&str>, message: &str, fence: &Fence) -> Option<LockError> {
    match code {
        FENCED_SQLSTATE => Some(match detail.and_then(current) {
            Some(current) => LockError::Fenced {
                resource: fence.resource.clone(),
                token: fence.token,
                current,
            },
            None => LockError::Backend {
                backend: BACKEND,
                op: Op::Acquire,
                retryable: false,
                source: format!("a stale token refused, without the recorded token: {message}")
                    .into(),
            },
        }),
        INVALID_PARAMETER => Some(LockError::invalid(message.to_owned())),
        _ => None,
    }
}

/// The recorded token in the refusal's DETAIL, `token=<t> current=<c> resource=<r>`.
fn current(detail: &str) -> Option<u64> {
    detail
        .split(' ')
        .find_map(|field| field.strip_prefix("current="))?
        .parse()
        .ok()
}

/// [`fence`] through sqlx: checks `fence` in the transaction of `conn`, with the same rule,
/// lock and errors. Pass a transaction as `&mut *tx` (a `sqlx::Transaction<'_, Postgres>`
/// dereferences to its `PgConnection`); a pooled connection as `&mut *conn`.
///
/// # Errors
/// As [`fence`]: [`LockError::Fenced`] for a stale token, [`LockError::InvalidInput`] for a bad
/// resource name, [`LockError::Backend`] with a [`MissingTable`](crate::MissingTable) source
/// before the migration, [`LockError::Backend`] otherwise (the sqlx error as its source).
///
/// # Cancel safety
/// As [`fence`]: dropping the future leaves the outcome unknown until the transaction ends;
/// roll it back (dropping a `sqlx::Transaction` does).
#[cfg(feature = "sqlx")]
pub async fn fence_sqlx(conn: &mut sqlx::PgConnection, fence: &Fence) -> Result<(), LockError> {
    check(fence)?;
    let done = sqlx::query_scalar::<_, String>(FENCE)
        .bind(&fence.resource)
        .bind(fence.token.to_string())
        .fetch_one(&mut *conn)
        .await;
    match done {
        Ok(_) => Ok(()),
        Err(err) => Err(from_sqlx(err, fence)),
    }
}

/// Maps sqlx's error for a fence as [`fence`] maps tokio-postgres's.
#[cfg(feature = "sqlx")]
fn from_sqlx(err: sqlx::Error, fence: &Fence) -> LockError {
    use tokio_postgres::error::SqlState;
    let mut retryable = matches!(
        err,
        sqlx::Error::Io(_) | sqlx::Error::PoolTimedOut | sqlx::Error::WorkerCrashed
    );
    if let sqlx::Error::Database(db) = &err
        && let Some(pg) = db.try_downcast_ref::<sqlx::postgres::PgDatabaseError>()
    {
        if let Some(answer) = answer(pg.code(), pg.detail(), pg.message(), fence) {
            return answer;
        }
        let described = format!("ERROR ({}): {}", pg.code(), pg.message());
        if pg.code() == SqlState::UNDEFINED_FUNCTION.code()
            || pg.code() == SqlState::UNDEFINED_TABLE.code()
        {
            let missing = crate::MissingTable::new(described, Box::new(err));
            return LockError::Backend {
                backend: BACKEND,
                op: Op::Acquire,
                retryable: false,
                source: Box::new(missing),
            };
        }
        retryable = crate::error::retryable_code(pg.code());
    }
    LockError::Backend {
        backend: BACKEND,
        op: Op::Acquire,
        retryable,
        source: Box::new(err),
    }
}

#[cfg(test)]
mod tests {
    use super::{Fence, LockError, answer, check, current};

    #[test]
    fn the_refusal_detail_gives_the_recorded_token() {
        assert_eq!(current("token=22 current=23 resource=a b=c"), Some(23));
        assert_eq!(current("token=22 resource=x"), None);
        let fenced = answer("DL409", Some("token=22 current=23 resource=acct"), "m", &{
            Fence::new("acct", 22)
        });
        assert!(matches!(
            fenced,
            Some(LockError::Fenced { ref resource, token: 22, current: 23 }) if resource == "acct"
        ));
        assert!(answer("40001", None, "m", &Fence::new("acct", 1)).is_none());
    }

    #[test]
    fn bad_resource_names_are_refused_before_sending() {
        assert!(matches!(
            check(&Fence::new("", 1)),
            Err(LockError::InvalidInput { .. })
        ));
        assert!(matches!(
            check(&Fence::new("a\0b", 1)),
            Err(LockError::InvalidInput { .. })
        ));
        assert!(check(&Fence::new("acct", 0)).is_ok());
    }
}
