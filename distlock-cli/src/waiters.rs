//! Waiters by name as operators see them: a request that describes its waiter
//! (`LockRequest::describe_waiter`, which `distlock run` does) keeps a record
//! `NAME:distlock-waiter:ID` while it waits (`lock_core::waiter_record_of` tells it); `ls`,
//! `show`, `/api/locks` and the console list those records under the lock they wait for.

use lock_core::backend::{Inspect, ListOptions, NamePattern};

use crate::exit::Failure;
use crate::inspect::{LockInfo, WaiterInfo, description};

/// The waiter a record's row describes.
fn waiter(record: &LockInfo) -> WaiterInfo {
    let fields = record.holder.as_ref().map(description).unwrap_or_default();
    let text = |name: &str| fields.get(name).and_then(|v| v.as_str()).map(str::to_owned);
    WaiterInfo {
        host: text("host"),
        pid: fields.get("pid").and_then(serde_json::Value::as_u64),
        note: text("note"),
        since_ms: fields
            .get("since_ms")
            .and_then(serde_json::Value::as_u64)
            .or(record.since_ms),
    }
}

/// Folds the waiters' records in `locks` into the rows of the locks they wait for (the first
/// row of that name), longest waiting first; a record whose lock is not among the rows (it
/// was released between two reads) goes with it.
pub(crate) fn fold(locks: &mut Vec<LockInfo>) {
    let mut found: Vec<(String, WaiterInfo)> = Vec::new();
    locks.retain(|lock| match lock_core::waiter_record_of(&lock.name) {
        Some(base) => {
            found.push((base.to_owned(), waiter(lock)));
            false
        }
        None => true,
    });
    for (base, waiter) in found {
        if let Some(lock) = locks.iter_mut().find(|l| l.name == base) {
            lock.waiting.push(waiter);
        }
    }
    for lock in locks.iter_mut() {
        lock.waiting.sort_by_key(|w| w.since_ms.unwrap_or(u64::MAX));
    }
}

/// The waiters' records of `name` (for `show NAME`): one listing of `NAME:distlock-waiter:*`.
///
/// # Errors
/// A backend failure when the store fails or is slow.
pub(crate) async fn records_of(
    inspector: &dyn Inspect,
    name: &str,
) -> Result<Vec<LockInfo>, Failure> {
    let pattern = format!("{}:distlock-waiter:*", glob::Pattern::escape(name));
    let pattern = NamePattern::new(&pattern)?;
    let listing = inspector.list(&pattern, &ListOptions::default()).await?;
    Ok(listing
        .locks
        .into_iter()
        .filter(|held| lock_core::waiter_record_of(&held.name) == Some(name))
        .map(LockInfo::from_held)
        .collect())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use lock_core::backend::Holder;

    use super::fold;
    use crate::inspect::LockInfo;

    fn row(name: &str, note: Option<&str>) -> LockInfo {
        LockInfo {
            name: name.to_owned(),
            kind: "mutex",
            holder: note.map(|n| {
                let mut holder = Holder::new(1, None);
                holder.note = Some(Arc::from(n.as_bytes()));
                holder
            }),
            ..LockInfo::default()
        }
    }

    #[test]
    fn records_fold_under_their_lock_longest_waiting_first() {
        let mut locks = vec![
            row("job", None),
            row(
                "job:distlock-waiter:00000000000000a1",
                Some(r#"{"host":"b","pid":2,"note":"second","since_ms":20}"#),
            ),
            row(
                "job:distlock-waiter:00000000000000a2",
                Some(r#"{"host":"a","pid":1,"note":"first","since_ms":10}"#),
            ),
            // Its lock was released between two reads.
            row("gone:distlock-waiter:00000000000000a3", Some("x")),
        ];
        fold(&mut locks);
        assert_eq!(locks.len(), 1);
        let notes: Vec<_> = locks[0].waiting.iter().map(|w| w.note.as_deref()).collect();
        assert_eq!(notes, [Some("first"), Some("second")]);
        assert_eq!(locks[0].waiting[0].pid, Some(1));
    }
}
