//! Redlock's masters' answers put together (`redlock.rs` reads them): a lock is held when a
//! quorum (`N/2 + 1`) of the masters hold it with the same token; its figures are the
//! conservative aggregates the module docs of `redlock.rs` give.

use std::collections::{BTreeMap, HashMap};

use crate::inspect::{LockInfo, NO_QUORUM, NodeAnswer, Quorum};

/// The masters' answers for one name and kind (`found[i]`: master `i`'s lock, if it holds
/// one), put together: the lock held by a quorum with one token, or with `no_quorum` a
/// [`NO_QUORUM`] entry when no token has a quorum. `errors[i]`: why master `i` did not answer.
/// `with_nodes`: each master's answer as a row.
pub(super) fn aggregate(
    masters: &[&str],
    found: &[Option<&LockInfo>],
    errors: &[Option<&str>],
    with_nodes: bool,
    no_quorum: bool,
) -> Option<LockInfo> {
    let required = masters.len() / 2 + 1;
    let (best, holding) = most_held(found);
    let held = holding >= required;
    if !held && !no_quorum {
        return None;
    }
    let first = found.iter().flatten().next()?;
    let mut lock = if held {
        quorum_lock(masters, found, &best, required, first)
    } else {
        no_quorum_entry(masters, first)
    };
    lock.quorum = Some(Quorum {
        holding,
        required,
        masters: masters.len(),
        answered: errors.iter().filter(|e| e.is_none()).count(),
    });
    if with_nodes {
        lock.nodes = node_answers(masters, found, errors, held.then_some(&best));
    }
    Some(lock)
}

/// The token most masters hold, and how many hold it (ties: the smaller token, so the answer
/// is stable); `(None, 0)` when none holds one.
fn most_held(found: &[Option<&LockInfo>]) -> (Option<String>, usize) {
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for lock in found.iter().flatten() {
        if let Some(token) = lock.token.as_deref() {
            *counts.entry(token).or_default() += 1;
        }
    }
    counts
        .iter()
        .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
        .map_or((None, 0), |(t, n)| (Some((*t).to_owned()), *n))
}

/// The lock a quorum holds with `best`, from the agreeing masters' answers, with the
/// conservative figures (`redlock.rs`): the `required`-th longest TTL, the largest fencing
/// token, waiters and queue; `node` lists the agreeing masters. `first`: the first answer,
/// should none agree.
fn quorum_lock(
    masters: &[&str],
    found: &[Option<&LockInfo>],
    best: &Option<String>,
    required: usize,
    first: &LockInfo,
) -> LockInfo {
    let agreeing: Vec<&LockInfo> = found
        .iter()
        .flatten()
        .copied()
        .filter(|l| l.token == *best)
        .collect();
    let mut ttls: Vec<i64> = agreeing.iter().filter_map(|l| l.ttl_ms).collect();
    ttls.sort_unstable_by(|a, b| b.cmp(a));
    let holder_of = agreeing.first().copied().unwrap_or(first);
    LockInfo {
        ttl_ms: ttls.get(required - 1).copied(),
        fencing_token: agreeing.iter().filter_map(|l| l.fencing_token).max(),
        waiters: agreeing.iter().map(|l| l.waiters).max().unwrap_or(0),
        queued: agreeing.iter().map(|l| l.queued).max().unwrap_or(0),
        holder: agreeing.iter().find_map(|l| l.holder.clone()),
        node: masters
            .iter()
            .zip(found)
            .filter(|(_, l)| l.is_some_and(|l| l.token == *best))
            .map(|(a, _)| *a)
            .collect::<Vec<_>>()
            .join(","),
        ..holder_of.clone()
    }
}

/// The [`NO_QUORUM`] entry of a name some masters hold but no quorum does: its name and key
/// (from `first`, an answer) and the masters.
fn no_quorum_entry(masters: &[&str], first: &LockInfo) -> LockInfo {
    LockInfo {
        name: first.name.clone(),
        key: first.key.clone(),
        kind: NO_QUORUM,
        node: masters.join(","),
        ..LockInfo::default()
    }
}

/// Each master's own answer as a row; `agreed`: the quorum's token, when there is one (a
/// master agrees when it holds that).
fn node_answers(
    masters: &[&str],
    found: &[Option<&LockInfo>],
    errors: &[Option<&str>],
    agreed: Option<&Option<String>>,
) -> Vec<NodeAnswer> {
    masters
        .iter()
        .zip(found.iter().zip(errors))
        .map(|(addr, (lock, error))| NodeAnswer {
            node: (*addr).to_owned(),
            token: lock.and_then(|l| l.token.clone()),
            ttl_ms: lock.and_then(|l| l.ttl_ms),
            fencing_token: lock.and_then(|l| l.fencing_token),
            agrees: agreed.is_some_and(|best| lock.is_some_and(|l| l.token == *best)),
            error: error.map(str::to_owned),
        })
        .collect()
}

/// Every (name, kind) in the masters' answers, each with what every master says of it.
pub(super) fn by_lock(
    answers: &[Result<Vec<LockInfo>, String>],
) -> BTreeMap<(String, &'static str), Vec<Option<&LockInfo>>> {
    let mut locks: BTreeMap<(String, &'static str), Vec<Option<&LockInfo>>> = BTreeMap::new();
    for (i, answer) in answers.iter().enumerate() {
        for lock in answer.iter().flatten() {
            locks
                .entry((lock.name.clone(), lock.kind))
                .or_insert_with(|| vec![None; answers.len()])[i] = Some(lock);
        }
    }
    locks
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(token: &str, ttl: i64, fence: u64) -> LockInfo {
        LockInfo {
            name: "job".into(),
            key: "job".into(),
            kind: "mutex",
            token: Some(token.into()),
            ttl_ms: Some(ttl),
            fencing_token: Some(fence),
            waiters: 1,
            ..LockInfo::default()
        }
    }

    #[test]
    fn a_quorum_with_one_token_is_held_with_conservative_figures() {
        let (a, b, c) = (
            held("dl:a", 9_000, 5),
            held("dl:a", 7_000, 9),
            held("dl:b", 8_000, 2),
        );
        let masters = ["m1", "m2", "m3"];
        let lock = aggregate(
            &masters,
            &[Some(&a), Some(&b), Some(&c)],
            &[None, None, None],
            true,
            false,
        )
        .expect("held");
        assert_eq!(lock.token.as_deref(), Some("dl:a"));
        assert_eq!(lock.ttl_ms, Some(7_000), "the quorum-th longest TTL");
        assert_eq!(lock.fencing_token, Some(9), "the largest of the holders'");
        assert_eq!(lock.waiters, 1, "the largest, not the sum");
        assert_eq!(lock.node, "m1,m2");
        let q = lock.quorum.expect("verdict");
        assert_eq!((q.holding, q.required, q.masters), (2, 2, 3));
        assert_eq!(
            lock.nodes.iter().map(|n| n.agrees).collect::<Vec<_>>(),
            [true, true, false]
        );
    }

    #[test]
    fn a_minority_is_not_held_and_show_gives_each_master() {
        let a = held("dl:a", 9_000, 5);
        let masters = ["m1", "m2", "m3"];
        let found = [Some(&a), None, None];
        let errors = [None, None, Some("refused")];
        assert!(aggregate(&masters, &found, &errors, false, false).is_none());
        let shown = aggregate(&masters, &found, &errors, true, true).expect("shown");
        assert_eq!(shown.kind, NO_QUORUM);
        assert!(!shown.is_held());
        assert_eq!(shown.token, None);
        assert_eq!(shown.nodes.len(), 3);
        assert_eq!(shown.nodes[0].token.as_deref(), Some("dl:a"));
        assert_eq!(shown.nodes[2].error.as_deref(), Some("refused"));
    }
}
