//! The `GET_LOCK` locks (`MysqlAdvisoryLock`, or any other client's) the server tells of: from
//! MariaDB's `information_schema.METADATA_LOCK_INFO` (the `metadata_lock_info` plugin:
//! `plugin-load-add = metadata_lock_info`), else MySQL's `performance_schema.metadata_locks`
//! (with `performance_schema.threads` for the connection id). Neither where the plugin is not
//! loaded, the schema is off or not granted: then none are listed (the README says so).

use futures::FutureExt;
use lock_core::Op;
use lock_core::backend::{HeldKind, HeldLock, HolderView};

use super::Filter;
use crate::advisory::{HASHED_PREFIX, advisory_name};
use crate::executor::Executor;

/// Where the server may tell who holds its `GET_LOCK` locks, tried in turn: the lock's name
/// and the connection id that holds it, for names `{on}` covers, and the column `{on}` is on.
const SOURCES: [(&str, &str); 2] = [
    (
        "SELECT CAST(TABLE_SCHEMA AS CHAR), CAST(THREAD_ID AS SIGNED) \
         FROM information_schema.METADATA_LOCK_INFO \
         WHERE LOCK_TYPE = 'User lock' AND {on}",
        "TABLE_SCHEMA",
    ),
    (
        "SELECT CAST(m.OBJECT_NAME AS CHAR), CAST(t.PROCESSLIST_ID AS SIGNED) \
         FROM performance_schema.metadata_locks m \
         JOIN performance_schema.threads t ON t.THREAD_ID = m.OWNER_THREAD_ID \
         WHERE m.OBJECT_TYPE = 'USER LEVEL LOCK' AND m.LOCK_STATUS = 'GRANTED' AND {on}",
        "m.OBJECT_NAME",
    ),
];

/// The condition on `column` for `filter`: a listing also reads every hashed name (a long
/// name's `GET_LOCK` name, [`advisory_name`]: the server cannot tell which names they hide).
fn condition(filter: &Filter, column: &str) -> String {
    match filter {
        Filter::Name(_) => format!("{column} {}", filter.condition()),
        Filter::Like(_) => format!(
            "({column} {} OR {column} LIKE '{HASHED_PREFIX}%')",
            filter.condition()
        ),
    }
}

/// The `GET_LOCK` locks `filter` covers (one name is looked up under its `GET_LOCK` name,
/// [`advisory_name`]), each [`HeldKind::Session`] held by its connection: token the connection
/// id, note `connection <id>`; no TTL, fencing token or time of grant (a session lock has
/// none). A listing's hashed names are shown as such (but by the lock that holds them: its
/// inspector knows their names). Empty where the server tells nothing.
pub(super) async fn read(exec: &Executor, filter: &Filter, node: &str) -> Vec<HeldLock> {
    let value = match filter {
        Filter::Name(name) => advisory_name(name),
        Filter::Like(like) => like.clone(),
    };
    for (source, column) in SOURCES {
        let sql = source.replace("{on}", &condition(filter, column));
        let value = value.clone();
        let rows = exec
            .run(
                Op::Read,
                Box::new(move |c| {
                    async move {
                        sqlx::query_as::<_, (String, i64)>(&sql)
                            .bind(value)
                            .fetch_all(c)
                            .await
                    }
                    .boxed()
                }),
            )
            .await;
        // A table this server does not have, or does not let us read: try the next.
        let Ok(rows) = rows else { continue };
        return rows
            .into_iter()
            .map(|(name, connection)| {
                let holder = HolderView::new(connection.to_string())
                    .note(format!("connection {connection}").into_bytes());
                HeldLock::new(name.clone(), name, HeldKind::Session, node).holder(holder)
            })
            .collect();
    }
    Vec::new()
}
