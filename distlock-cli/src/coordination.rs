//! Latches and barriers as operators see them: lock-core keeps each as a few semaphores under
//! names derived from its own (`Coordination::of` tells them), and `ls`, `show`, `/api/locks`
//! and the console fold those records into one row per latch or barrier, with its count.

use lock_core::{Coordination as What, CoordinationRecord};

use crate::inspect::{CoordinationInfo, LockInfo};

/// The permits in use of a record's row (0 when the row says none).
fn used(lock: &LockInfo) -> u64 {
    lock.permits.as_ref().and_then(|p| p.used).unwrap_or(0)
}

/// The permits a record's row says its semaphore has.
fn max(lock: &LockInfo) -> Option<u64> {
    lock.permits.as_ref().and_then(|p| p.max)
}

/// Folds the records of latches and barriers in `locks` into one row each (named as the
/// latch or barrier, kind `latch` or `barrier`, its present parties as the holders), in the
/// place of its first record; other rows are kept as they are.
pub(crate) fn fold(locks: &mut Vec<LockInfo>) {
    let mut folded: Vec<LockInfo> = Vec::new();
    let mut out = Vec::with_capacity(locks.len());
    for lock in locks.drain(..) {
        let Some((what, record, base)) = What::of(&lock.name) else {
            out.push(lock);
            continue;
        };
        let base = base.to_owned();
        match folded
            .iter_mut()
            .find(|row| row.name == base && row.kind == what.as_str())
        {
            Some(row) => add(row, what, record, &lock),
            None => {
                let mut row = LockInfo {
                    name: base,
                    key: lock.key.clone(),
                    kind: what.as_str(),
                    node: lock.node.clone(),
                    ttl_ms: lock.ttl_ms,
                    ..LockInfo::default()
                };
                add(&mut row, what, record, &lock);
                out.push(LockInfo {
                    name: row.name.clone(),
                    kind: row.kind,
                    ..LockInfo::default()
                });
                folded.push(row);
            }
        }
    }
    // Each placeholder takes its folded row.
    for slot in &mut out {
        if slot.coordination.is_none()
            && let Some(at) = folded
                .iter()
                .position(|row| row.name == slot.name && row.kind == slot.kind)
        {
            let mut row = folded.swap_remove(at);
            settle(&mut row);
            *slot = row;
        }
    }
    *locks = out;
}

/// Adds one record's counts to the row of its latch or barrier.
fn add(row: &mut LockInfo, what: What, record: CoordinationRecord, lock: &LockInfo) {
    let info = row.coordination.get_or_insert_with(|| CoordinationInfo {
        counted_down: (what == What::Latch).then_some(0),
        lost: (what == What::Latch).then_some(0),
        passed: (what == What::Barrier).then_some(0),
        ..CoordinationInfo::default()
    });
    let n = used(lock);
    // Every record of a latch has `count` permits, a barrier's members too (its passes have
    // as many as may pass).
    if record != CoordinationRecord::Open
        && let Some(count) = max(lock)
    {
        info.count = count;
    }
    match record {
        CoordinationRecord::Parties => {
            info.present = n;
            row.permits.clone_from(&lock.permits);
            row.key.clone_from(&lock.key);
            row.ttl_ms = lock.ttl_ms;
        }
        CoordinationRecord::Joined => info.joined = n,
        CoordinationRecord::Done => info.counted_down = Some(n),
        CoordinationRecord::Open => info.passed = Some(n),
        _ => {}
    }
}

/// Computes what needs every record read: a latch's lost parties, and the state.
fn settle(row: &mut LockInfo) {
    let Some(info) = row.coordination.as_mut() else {
        return;
    };
    info.state = match (info.counted_down, info.passed) {
        (Some(done), _) => {
            let lost = info
                .joined
                .saturating_sub(done.saturating_add(info.present));
            info.lost = Some(lost);
            if info.count > 0 && done >= info.count {
                "open"
            } else if lost > 0 {
                "broken"
            } else {
                "waiting"
            }
        }
        (None, passed) => {
            if passed.unwrap_or(0) > 0 || (info.count > 0 && info.present >= info.count) {
                "open"
            } else {
                "filling"
            }
        }
    };
}

/// The names of the records of the latch and the barrier `name` (for `show NAME`, which
/// reads them beside the name itself).
pub(crate) fn record_names(name: &str) -> Vec<String> {
    let latch = [
        CoordinationRecord::Parties,
        CoordinationRecord::Joined,
        CoordinationRecord::Done,
    ]
    .map(|record| What::Latch.record_name(record, name));
    let barrier = [CoordinationRecord::Parties, CoordinationRecord::Open]
        .map(|record| What::Barrier.record_name(record, name));
    latch.into_iter().chain(barrier).collect()
}

#[cfg(test)]
mod tests {
    use super::fold;
    use crate::inspect::{LockInfo, Members, Permits};

    fn semaphore(name: &str, max: u64, used: u64) -> LockInfo {
        LockInfo {
            name: name.to_owned(),
            kind: "semaphore",
            permits: Some(Permits {
                max: Some(max),
                used: Some(used),
                holders: Members {
                    count: used,
                    shown: Vec::new(),
                },
            }),
            ..LockInfo::default()
        }
    }

    #[test]
    fn records_fold_into_one_row_each_with_their_counts() {
        let mut locks = vec![
            semaphore("a", 2, 1),
            semaphore("batch:distlock-latch-done", 3, 1),
            semaphore("batch:distlock-latch-joined", 3, 3),
            semaphore("batch:distlock-latch-parties", 3, 1),
            semaphore("gate:distlock-barrier", 4, 2),
            semaphore("gate:distlock-barrier-open", 1_000_000, 0),
        ];
        fold(&mut locks);
        let rows: Vec<(&str, &str)> = locks.iter().map(|l| (l.name.as_str(), l.kind)).collect();
        assert_eq!(
            rows,
            [("a", "semaphore"), ("batch", "latch"), ("gate", "barrier")]
        );
        let latch = locks[1].coordination.as_ref().expect("a latch's count");
        // 3 joined, 1 counted down, 1 present: one left without counting down.
        assert_eq!(
            (
                latch.count,
                latch.counted_down,
                latch.present,
                latch.lost,
                latch.state
            ),
            (3, Some(1), 1, Some(1), "broken")
        );
        assert_eq!(
            latch.summary(),
            "1/3 counted down, 1 present, 1 lost (broken)"
        );
        let barrier = locks[2].coordination.as_ref().expect("a barrier's count");
        assert_eq!(
            (
                barrier.count,
                barrier.present,
                barrier.passed,
                barrier.state
            ),
            (4, 2, Some(0), "filling")
        );
    }
}
