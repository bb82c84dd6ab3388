//! The nodes' answers put together: a name is held when a quorum (`N/2 + 1`) of the nodes hold
//! it with the same token. Its figures are conservative:
//! - TTL: the quorum-th longest of the holding nodes' TTLs, the time until fewer than a quorum
//!   hold it (no drift allowance is subtracted: the holder does that);
//! - fencing token: the largest of the holding nodes', which is how Redlock picks a grant's
//!   token (the crate README, "Fencing tokens");
//! - waiters and queued: the largest count of one node (a Redlock waiter subscribes on every
//!   node, so a sum would count it N times).

use std::collections::{BTreeMap, HashMap};

use lock_core::backend::{HeldLock, MemberAnswer, QuorumView};

/// What every node says of one (name, kind): `found[i]`, node `i`'s hold, if it has one.
pub(super) type Answers<'a> = Vec<Option<&'a HeldLock>>;

/// Every (name, kind) in the nodes' answers, each with what every node says of it.
pub(super) fn by_lock<E>(
    answers: &[Result<Vec<HeldLock>, E>],
) -> BTreeMap<(String, &'static str), Answers<'_>> {
    let mut locks: BTreeMap<(String, &'static str), Answers<'_>> = BTreeMap::new();
    for (i, answer) in answers.iter().enumerate() {
        for lock in answer.iter().flatten() {
            locks
                .entry((lock.name.clone(), lock.kind.as_str()))
                .or_insert_with(|| vec![None; answers.len()])[i] = Some(lock);
        }
    }
    locks
}

/// The token of a node's hold: its first holder's.
fn token(lock: &HeldLock) -> Option<&str> {
    lock.first_holder().map(|h| h.token.as_str())
}

/// The nodes' answers for one name and kind put together: the hold of a quorum with one
/// token; with `no_quorum`, a hold with no holder and a quorum verdict short of the quorum
/// when no token has one (else `None`). `labels[i]`: node `i`'s label; `errors[i]`: why it did
/// not answer. `with_members`: each node's own answer too.
pub(super) fn aggregate(
    labels: &[&str],
    found: &[Option<&HeldLock>],
    errors: &[Option<String>],
    with_members: bool,
    no_quorum: bool,
) -> Option<HeldLock> {
    let required = labels.len() / 2 + 1;
    let (best, holding) = most_held(found);
    let held = holding >= required;
    if !held && !no_quorum {
        return None;
    }
    let first = found.iter().flatten().next()?;
    let mut lock = if held {
        quorum_lock(labels, found, best.as_deref(), required, first)
    } else {
        HeldLock::new(
            first.name.clone(),
            first.key.clone(),
            first.kind,
            labels.join(","),
        )
    };
    lock.quorum = Some(QuorumView::new(
        holding,
        required,
        labels.len(),
        errors.iter().filter(|e| e.is_none()).count(),
    ));
    if with_members {
        lock.members = member_answers(labels, found, errors, held.then_some(best.as_deref()));
    }
    Some(lock)
}

/// The token most nodes hold, and how many hold it (ties: the smaller token, so the answer is
/// stable); `(None, 0)` when none holds one.
fn most_held(found: &[Option<&HeldLock>]) -> (Option<String>, usize) {
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for lock in found.iter().flatten() {
        if let Some(token) = token(lock) {
            *counts.entry(token).or_default() += 1;
        }
    }
    counts
        .iter()
        .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
        .map_or((None, 0), |(t, n)| (Some((*t).to_owned()), *n))
}

/// The hold a quorum has with `best`, from the agreeing nodes' answers, with the conservative
/// figures of the module docs; `node` lists the agreeing nodes. `first`: the first answer,
/// should none agree.
fn quorum_lock(
    labels: &[&str],
    found: &[Option<&HeldLock>],
    best: Option<&str>,
    required: usize,
    first: &HeldLock,
) -> HeldLock {
    let agreeing: Vec<&HeldLock> = found
        .iter()
        .flatten()
        .copied()
        .filter(|l| token(l) == best)
        .collect();
    let mut ttls: Vec<_> = agreeing
        .iter()
        .filter_map(|l| l.first_holder()?.ttl)
        .collect();
    ttls.sort_unstable_by(|a, b| b.cmp(a));
    let base = agreeing.first().copied().unwrap_or(first);
    let mut lock = base.clone();
    // The note a Redlock writes on every node is a record naming the grant (`record.rs`):
    // shown as the note it carries, with the Redlock lease's fencing token it names.
    let note = agreeing.iter().find_map(|l| l.first_holder()?.note.clone());
    let record = note.as_deref().and_then(crate::record::open);
    if let Some(holder) = lock.holders.first_mut() {
        holder.ttl = ttls.get(required - 1).copied();
        // Without a record the grant's own token is not known: a node that answered after the
        // quorum decided may hold a larger one than the lease carries.
        holder.fencing_token = record.map(|(id, _)| id.fence);
        holder.note = match record {
            Some((_, text)) => Some(text.into()),
            None => note.clone(),
        };
        holder.since = agreeing.iter().find_map(|l| l.first_holder()?.since);
    }
    lock.last_fencing_token = agreeing.iter().filter_map(|l| l.last_fencing_token).max();
    lock.waiters = agreeing.iter().map(|l| l.waiters).max().unwrap_or(0);
    lock.queued = agreeing.iter().map(|l| l.queued).max().unwrap_or(0);
    lock.node = labels
        .iter()
        .zip(found)
        .filter(|(_, l)| l.is_some_and(|l| token(l) == best))
        .map(|(a, _)| *a)
        .collect::<Vec<_>>()
        .join(",");
    lock
}

/// Each node's own answer; `agreed`: the quorum's token, when there is one (a node agrees when
/// it holds that).
fn member_answers(
    labels: &[&str],
    found: &[Option<&HeldLock>],
    errors: &[Option<String>],
    agreed: Option<Option<&str>>,
) -> Vec<MemberAnswer> {
    labels
        .iter()
        .zip(found.iter().zip(errors))
        .map(|(label, (lock, error))| {
            let holder = lock.and_then(|l| l.first_holder());
            let mut answer = MemberAnswer::new(*label);
            answer.token = holder.map(|h| h.token.clone());
            answer.ttl = holder.and_then(|h| h.ttl);
            answer.fencing_token = lock.and_then(|l| l.last_fencing_token);
            answer.agrees = agreed.is_some_and(|best| lock.is_some_and(|l| token(l) == best));
            answer.error.clone_from(error);
            answer
        })
        .collect()
}
