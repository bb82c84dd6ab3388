//! The fair lock: the mutex of the name, granted only to the oldest waiter in the name's queue.
//!
//! A waiter's queue entry is the key `prefix + "\0fair/" + len(name) + ":" + name + "/" + token`
//! on an etcd lease of its own that lasts [`fair_entry_ttl`] and is kept alive by each attempt, so an
//! entry whose waiter stopped trying lapses by itself. Its creation revision is its place: an
//! attempt keeps the place it has (the entry is put only if absent). A queued attempt is two
//! transactions: put the entry if absent and read its creation revision; then, if the lock key
//! is absent and every entry of the name was created at or after ours (a range compare: we are
//! the head), put the lock key on the holder's etcd lease and delete our entry. A single try
//! (`queued: false`) is one transaction, granted only when the lock key is absent and the queue
//! is empty. Releasing a token deletes its entry too, granted or not.

use std::time::Duration;

use etcd_client::{Client, Compare, CompareOp, Txn, TxnOp};
use lock_core::backend::Attempt;
use lock_core::{Kind, Lease, LockError, Op, Token, fair_entry_ttl, valid_until};
use tokio::time::Instant;

use super::mutex;
use crate::error::malformed;
use crate::executor::{Executor, put_on_value, read, revision};
use crate::layout::{EtcdLease, FAIR as MARK, entry_key, range_end, stamp, under, unstamp, value};

/// How soon a waiter that is not the head tries again when the lock is free (the head is about
/// to take it; its grant is not announced, its release is).
const NOT_HEAD_RETRY: Duration = Duration::from_millis(100);

/// One attempt at the fair lock of `name`; see the module docs.
pub(crate) async fn try_acquire(
    exec: &Executor,
    name: &str,
    queued: bool,
    token: Token,
    ttl: Duration,
) -> Result<Attempt, LockError> {
    let started = Instant::now();
    let client = exec.client().await?;
    let lock_key = exec.key(name);
    let etcd_lease = EtcdLease::of_grant(&token, name);
    let kind = Kind::Fair { queued };
    let (head, took) = if queued {
        take_place(exec, &client, name, &token, etcd_lease, ttl).await?
    } else {
        exec.grant_etcd_lease(&client, Op::Acquire, etcd_lease, ttl)
            .await?;
        let (start, end) = queue(exec.prefix(), name);
        (
            Compare::version(start, CompareOp::Equal, 0).with_range(end),
            Vec::new(),
        )
    };
    let mut then = vec![
        put_on_value(lock_key.clone(), value(&token), etcd_lease),
        stamp(exec.prefix(), name, &token, etcd_lease.id()),
    ];
    then.extend(took);
    let txn = Txn::new()
        .when([
            Compare::create_revision(lock_key.clone(), CompareOp::Equal, 0),
            head,
        ])
        .and_then(then)
        .or_else([TxnOp::get(lock_key, None)]);
    let answer = exec.txn(&client, Op::Acquire, txn).await?;
    if answer.succeeded() {
        if queued {
            exec.revoke_etcd_lease_later(&client, EtcdLease::of_queue_entry(&token, name));
        }
        let fencing = revision(Op::Acquire, &answer)?;
        let lease = Lease::new(name, token, fencing, valid_until(started, ttl)).with_kind(kind);
        return Ok(Attempt::Acquired(lease));
    }
    if !queued {
        // A single try's token is not used again. A queued waiter's is, by its next attempt:
        // its grant's etcd lease stays (kept alive by that attempt, revoked by the release
        // that withdraws the waiter), since a revoke still on its way would land on the next
        // attempt's lease and fail it, and a failed attempt costs the waiter its place.
        exec.revoke_etcd_lease_later(&client, etcd_lease);
    }
    let holder = read(&answer, 0);
    if holder.is_none() {
        // Free, but another waiter is ahead.
        return Ok(Attempt::Busy {
            holder_ttl: Some(NOT_HEAD_RETRY),
            announces: true,
        });
    }
    Ok(exec.busy(&client, holder.as_ref(), false).await)
}

/// Takes `token`'s place in the queue of `name`, or keeps the one it has: the grant's
/// `etcd_lease` and the entry's (both kept alive, or granted), then one transaction that puts the entry if absent and
/// reads its creation revision. Answers the compare "this entry is the head" and the operation
/// that deletes the entry with the grant.
async fn take_place(
    exec: &Executor,
    client: &Client,
    name: &str,
    token: &Token,
    etcd_lease: EtcdLease,
    ttl: Duration,
) -> Result<(Compare, Vec<TxnOp>), LockError> {
    let entry = entry_key(exec.prefix(), name, token);
    let entry_etcd_lease = EtcdLease::of_queue_entry(token, name);
    // The grant's etcd lease is kept from the waiter's last attempt (its whole TTL again) or
    // granted: a grant on it is valid for `ttl` from this attempt's start either way.
    let (granted, kept) = tokio::join!(
        exec.keep_or_grant_etcd_lease(etcd_lease, ttl),
        exec.keep_or_grant_etcd_lease(entry_etcd_lease, fair_entry_ttl(ttl)),
    );
    granted?;
    kept?;
    let place = Txn::new().and_then([
        TxnOp::txn(
            Txn::new()
                .when([Compare::create_revision(entry.clone(), CompareOp::Equal, 0)])
                .and_then([put_on_value(entry.clone(), value(token), entry_etcd_lease)]),
        ),
        TxnOp::get(entry.clone(), None),
    ]);
    let placed = exec.txn(client, Op::Acquire, place).await?;
    let mine = read(&placed, 1)
        .map(|kv| kv.create_revision())
        .ok_or_else(|| malformed(Op::Acquire, "the queue entry"))?;
    let (start, end) = queue(exec.prefix(), name);
    Ok((
        Compare::create_revision(start, CompareOp::Greater, mine - 1).with_range(end),
        vec![TxnOp::delete(entry, None)],
    ))
}

/// The range of every queue entry of `name`: its start and its end.
fn queue(prefix: &str, name: &str) -> (Vec<u8>, Vec<u8>) {
    let start = under(MARK, prefix, name);
    let end = range_end(&start);
    (start, end)
}

/// Releases the fair `lease`: one transaction (if the lock key holds its token, delete it and
/// its queue entry; else delete the entry alone), its entry's etcd lease revoked in the
/// background:
/// a fair waiter's entry goes with its token, granted or not.
pub(crate) async fn release(exec: &Executor, lease: &Lease) -> Result<bool, LockError> {
    let client = exec.client().await?;
    let entry = entry_key(exec.prefix(), lease.name(), lease.token());
    exec.revoke_etcd_lease_later(
        &client,
        EtcdLease::of_queue_entry(lease.token(), lease.name()),
    );
    let lock_key = exec.key(lease.name());
    let txn = Txn::new()
        .when([Compare::value(
            lock_key.clone(),
            CompareOp::Equal,
            value(lease.token()),
        )])
        .and_then([
            TxnOp::delete(lock_key, None),
            TxnOp::delete(entry.clone(), None),
            unstamp(exec.prefix(), lease.name(), lease.token()),
        ])
        .or_else([TxnOp::delete(entry, None)]);
    mutex::send_release(exec, &client, lease, txn).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::name_of;

    #[test]
    fn entries_name_their_lock_and_lease_apart_from_it() {
        let token = Token::from_bytes([3; 16]);
        let entry = entry_key("p/", "a/b", &token);
        assert_eq!(name_of(b"p/", &entry), Some(&b"a/b"[..]));
        assert_ne!(
            EtcdLease::of_queue_entry(&token, "a/b"),
            EtcdLease::of_grant(&token, "a/b")
        );
    }
}
