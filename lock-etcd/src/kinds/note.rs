//! Holder descriptions for observers ([`Lock::describe_holder`], [`Lock::annotate`]), what
//! leader election's `leader()` and `observe()` read.
//!
//! The note of `name` is one key in a space of its own,
//! `prefix + "\0note/" + len(name) + ":" + name + "/"`, holding the grant's value (`dl:` +
//! token), a newline and the note, **on the etcd lease of the grant's key** (the shared lease of
//! renewed grants, a bucket lease, or the grant's own; a move off a bucket lease takes it
//! along, `moving.rs`): it expires with the grant and is deleted by its release, and a renewal
//! (an etcd lease keep-alive) keeps both alive without touching either.
//! The lock key itself keeps `dl:` + token. The value in front of the note ties it to one
//! grant: a note left by an earlier grant (written just before a release, before its etcd lease was
//! revoked in the background) is never shown with a later one.
//!
//! The term is the revision of the transaction that wrote the current value, i.e. the fencing
//! token `try_acquire` (or `hand_over`) returned for this grant: the lock key's `mod_revision`,
//! unless a grant on a bucket lease was moved to a lease of its own by an extend
//! (`moving.rs`), which writes the key again; so it is read from the grant-time key's
//! `create_revision`, which the move leaves (`layout::term`). A keep-alive changes no key.
//!
//! [`Lock::describe_holder`]: lock_core::backend::Lock::describe_holder
//! [`Lock::annotate`]: lock_core::backend::Lock::annotate

use std::time::Duration;

use etcd_client::{Compare, CompareOp, GetOptions, PutOptions, Txn, TxnOp, TxnOpResponse};
use lock_core::backend::Holder;
use lock_core::{Kind, Lease, LockError, Op, TimeoutPhase};

use crate::error::bounded;
use crate::executor::{Executor, read};
use crate::layout::{self, GRANTED, note_key, range_end, under};

// etcd's own limit on a request is 1.5 MiB by default, well above the note's.
pub use lock_core::MAX_NOTE_BYTES;

/// What the note key holds: the grant's stored value, a newline, the note.
fn note_value(stored: &[u8], note: &[u8]) -> Vec<u8> {
    let mut value = Vec::with_capacity(stored.len() + 1 + note.len());
    value.extend_from_slice(stored);
    value.push(b'\n');
    value.extend_from_slice(note);
    value
}

/// The note in `kv` if it was written beside the grant whose lock key holds `stored`.
fn note_of<'v>(written: &'v [u8], stored: &[u8]) -> Option<&'v [u8]> {
    written.strip_prefix(stored)?.strip_prefix(b"\n")
}

/// One `Txn`: if the lock key holds the lease's token, put the note key on the grant's etcd
/// lease; see the module docs.
pub(crate) async fn annotate(
    exec: &Executor,
    lease: &Lease,
    note: &[u8],
) -> Result<bool, LockError> {
    lock_core::check_note(note)?;
    // The mutex and the fair lock hold the name's lock key on the etcd lease derived from the
    // token and the name; other kinds hold other keys (and a writer is not a "holder" of
    // the mutex to observers), as on lock-redis.
    if !matches!(lease.kind(), Kind::Mutex | Kind::Fair { .. }) {
        return Ok(false);
    }
    let client = exec.client().await?;
    let stored = layout::value(lease.token());
    let key = exec.key(lease.name());
    // The note goes on the etcd lease the key is on (the shared lease of renewed grants or the
    // grant's own), read first: a transaction cannot name "the lease of that key".
    let held = exec
        .txn(
            &client,
            Op::Extend,
            Txn::new().and_then([TxnOp::get(key.clone(), None)]),
        )
        .await?;
    let Some(kv) = read(&held, 0).filter(|kv| kv.value() == stored.as_slice()) else {
        return Ok(false);
    };
    let txn = Txn::new()
        .when([
            Compare::value(key.clone(), CompareOp::Equal, stored.clone()),
            Compare::lease(key, CompareOp::Equal, kv.lease()),
        ])
        .and_then([TxnOp::put(
            note_key(exec.prefix(), lease.name()),
            note_value(&stored, note),
            Some(PutOptions::new().with_lease(kv.lease())),
        )]);
    Ok(exec.txn(&client, Op::Extend, txn).await?.succeeded())
}

/// One `Txn` reading the lock key and the note key together, then, for a holder on an etcd lease,
/// `LeaseTimeToLive`; see the module docs.
pub(crate) async fn describe(exec: &Executor, name: &str) -> Result<Option<Holder>, LockError> {
    let client = exec.client().await?;
    let stamps = under(GRANTED, exec.prefix(), name);
    let stamps_end = range_end(&stamps);
    let txn = Txn::new().and_then([
        TxnOp::get(exec.key(name), None),
        TxnOp::get(note_key(exec.prefix(), name), None),
        TxnOp::get(
            stamps,
            Some(GetOptions::new().with_range(stamps_end).with_keys_only()),
        ),
    ]);
    let answer = exec.txn(&client, Op::Acquire, txn).await?;
    let Some(holder) = read(&answer, 0) else {
        return Ok(None);
    };
    // A holder written by another client has no distlock grant, so no term: 0, as on
    // lock-redis. A distlock grant's term is the revision of the grant that wrote its value.
    let stamps = match answer.op_responses().into_iter().nth(2) {
        Some(TxnOpResponse::Get(get)) => get.kvs().to_vec(),
        _ => Vec::new(),
    };
    let fencing_token = layout::term(exec.prefix(), name, &holder, &stamps);
    let ttl = etcd_lease_left(exec, &client, holder.lease()).await?;
    let described = Holder::new(fencing_token, ttl);
    Ok(Some(
        match read(&answer, 1)
            .as_ref()
            .and_then(|kv| note_of(kv.value(), holder.value()))
        {
            Some(note) if fencing_token > 0 => described.with_note(note.to_vec()),
            _ => described,
        },
    ))
}

/// What the etcd lease `id` has left, in etcd's whole seconds (on a bucket lease, less the
/// bucket: `fixed_lease::holder_left`): `None` for a key without an etcd lease (`id` 0: it
/// never expires), zero for an etcd lease that ran out since the key was read.
async fn etcd_lease_left(
    exec: &Executor,
    client: &etcd_client::Client,
    id: i64,
) -> Result<Option<Duration>, LockError> {
    if id == 0 {
        return Ok(None);
    }
    let mut leases = client.lease_client();
    let answer = bounded(
        Op::Acquire,
        TimeoutPhase::Command,
        exec.command_timeout(),
        leases.time_to_live(id, None),
    )
    .await?;
    // etcd answers -1 for an etcd lease that is gone.
    let left = Duration::from_secs(u64::try_from(answer.ttl()).unwrap_or(0));
    Ok(Some(crate::fixed_lease::holder_left(id, left)))
}

#[cfg(test)]
mod tests {
    use lock_core::Token;

    use super::*;

    #[test]
    fn a_note_belongs_to_one_grant() {
        let (a, b) = (
            layout::value(&Token::from_bytes([1; 16])),
            layout::value(&Token::from_bytes([2; 16])),
        );
        let written = note_value(&a, b"pod-a\nline 2");
        assert_eq!(note_of(&written, &a), Some(&b"pod-a\nline 2"[..]));
        assert_eq!(note_of(&written, &b), None);
        assert_eq!(note_of(&note_value(&a, b""), &a), Some(&b""[..]));
        assert_eq!(note_of(&a, &a), None, "no separator: not a note");
    }
}
