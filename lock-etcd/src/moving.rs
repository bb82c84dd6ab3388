//! Extending a mutex grant that sits on a bucket lease (`fixed_lease.rs`: a grant of a fixed
//! TTL, or a hand-over): the bucket lease is never kept alive, since that would keep every
//! other key on it too (a leaked or stuck holder's key past its TTL), so the grant's keys move
//! to an etcd lease of its own first (its id derived from the token and the name, as for every
//! lease of its own), granted for the TTL asked. Later extends keep that lease alive
//! (`kinds/mutex.rs`).
//!
//! The move is one transaction: if the lock key still holds the grant's value and is still on
//! the bucket lease, put it again (same value) on the new lease, and its grant time and note
//! too where they are on the bucket lease (each in a nested transaction: they may be absent).
//! The put is a write, so the lock key's `mod_revision` moves past the grant's fencing token;
//! its `create_revision` and the grant time's stay the grant's. What reads the term knows it:
//! a held transaction compares `mod_revision >= fencing token` beside the value (`held.rs`),
//! and `describe_holder` and the operator's reads take the term from the grant time's
//! `create_revision` (`kinds/note.rs`, `inspect/`).

use std::time::Duration;

use etcd_client::{Compare, CompareOp, PutOptions, Txn, TxnOp};
use lock_core::{Lease, LockError, Op, valid_until};
use tokio::time::Instant;

use crate::executor::{Executor, put_on_value};
use crate::kinds::mutex;
use crate::layout::{EtcdLease, granted_key, held, note_key};

/// Extends the mutex `lease`, whose key was read on the bucket lease `bucket`, by moving it to
/// an etcd lease of its own of `ttl`; see the module docs. When the move finds the key no
/// longer ours or already moved (a concurrent extend), the extend of a lease of its own
/// answers.
///
/// # Errors
/// A `Command` timeout / [`LockError::Backend`] when etcd fails the lease grant or the move.
///
/// # Cancel safety
/// Cancel safe: dropped, the key is on one lease or the other, and a lease of its own granted
/// without a key runs out by itself.
pub(crate) async fn extend(
    exec: &Executor,
    lease: &Lease,
    ttl: Duration,
    bucket: i64,
) -> Result<Option<Instant>, LockError> {
    let started = Instant::now();
    let client = exec.client().await?;
    let own = EtcdLease::of_grant(lease.token(), lease.name());
    exec.grant_etcd_lease(&client, Op::Extend, own, ttl).await?;
    let (key, stored) = held(exec.prefix(), lease);
    let token_hex = lease.token().to_hex();
    let follow = |key: Vec<u8>| {
        TxnOp::txn(
            Txn::new()
                .when([Compare::lease(key.clone(), CompareOp::Equal, bucket)])
                .and_then([TxnOp::put(
                    key,
                    Vec::new(),
                    Some(PutOptions::new().with_lease(own.id()).with_ignore_value()),
                )]),
        )
    };
    let txn = Txn::new()
        .when([
            Compare::value(key.clone(), CompareOp::Equal, stored.clone()),
            Compare::lease(key.clone(), CompareOp::Equal, bucket),
        ])
        .and_then([
            put_on_value(key, stored, own),
            follow(granted_key(exec.prefix(), lease.name(), token_hex.as_str())),
            follow(note_key(exec.prefix(), lease.name())),
        ]);
    if exec.txn(&client, Op::Extend, txn).await?.succeeded() {
        return Ok(Some(valid_until(started, ttl)));
    }
    let extended = mutex::extend(exec, lease, ttl).await;
    if matches!(extended, Ok(None)) {
        // Not ours any more: the lease just granted carries nothing.
        exec.revoke_etcd_lease_later(&client, own);
    }
    extended
}
