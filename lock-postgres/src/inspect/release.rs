//! The lease a token holds, found for its release by token (`release --token`): the lock's
//! own release of that kind then frees it, announced as every release is.

use lock_core::{Kind, Lease, LockError, Op, Token};
use tokio_postgres::Row;
use tokio_postgres::types::Type;

use super::table::{Schema, schema};
use crate::error::unexpected;
use crate::executor::Executor;
use crate::sql::TABLE;

/// Which lease of `name` the token holds now, in every table a token lives in (and whether a
/// fair queue waits behind a mutex row). One statement.
fn holder_sql(schema: Schema) -> String {
    let live = "expires_at > clock_timestamp()";
    if !schema.kinds {
        return format!(
            "SELECT 'lease', false FROM {TABLE} WHERE name = $1 AND token = $2 AND {live}"
        );
    }
    format!(
        "SELECT 'lease', EXISTS (SELECT 1 FROM distlock_fair_queue q
        WHERE q.name = $1 AND q.lapses_at > clock_timestamp())
    FROM {TABLE} WHERE name = $1 AND token = $2 AND {live}
UNION ALL SELECT 'writer', false FROM distlock_rw WHERE name = $1 AND writer = $2 AND {live}
UNION ALL SELECT 'reader', false FROM distlock_rw_readers WHERE name = $1 AND token = $2 AND {live}
UNION ALL SELECT 'permits', false FROM distlock_permits WHERE name = $1 AND token = $2 AND {live}"
    )
}

/// The lease that `token` holds on `name` now, of the kind it holds it as, for the lock's own
/// release of that kind (which announces it, and tells a fair queue's head); `None` when the
/// token holds nothing of `name` (another token holds it, or nobody).
///
/// # Errors
/// [`LockError::Timeout`] / [`LockError::Backend`] when the query fails or is slow;
/// [`LockError::InvalidInput`] when `name` is held with `token` but it is not a distlock token
/// (another client's row: the lock's statements cannot release it).
pub(super) async fn lease_of(
    exec: &Executor,
    name: &str,
    token: &str,
) -> Result<Option<Lease>, LockError> {
    let schema = schema(exec).await?;
    if !schema.leases {
        return Ok(None);
    }
    let sql = holder_sql(schema);
    let rows = exec
        .query(
            Op::Release,
            &sql,
            &[(&name, Type::TEXT), (&token, Type::TEXT)],
        )
        .await?;
    let Some(row) = rows.first() else {
        return Ok(None);
    };
    let read = |row: &Row| -> Result<(String, bool), tokio_postgres::Error> {
        Ok((row.try_get(0)?, row.try_get(1)?))
    };
    let (table, queued) = read(row).map_err(|e| unexpected(Op::Release, e))?;
    // A token the library wrote is 32 hex characters; one that is not cannot be released
    // through the library's statements.
    let parsed: Token = token.parse().map_err(|_| {
        LockError::invalid(format!(
            "{name:?} is held with {token:?}, which is not a distlock token"
        ))
    })?;
    // Only the kind's table matters to a release; the numbers in it are not read.
    let kind = match table.as_str() {
        "lease" if queued => Kind::Fair { queued: true },
        "writer" => Kind::Write {
            writer_preference: true,
        },
        "reader" => Kind::Read {
            writer_preference: true,
        },
        "permits" => Kind::Semaphore { permits: 1, max: 1 },
        _ => Kind::Mutex,
    };
    let now = tokio::time::Instant::now();
    Ok(Some(Lease::new(name, parsed, 0, now).with_kind(kind)))
}
