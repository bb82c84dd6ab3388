//! The mutex: one holder, its `dl:` token under the lock key, on the shared etcd lease of
//! renewed grants (`shared.rs`) or, for a grant of a fixed TTL, on an etcd lease of the
//! holder's own (its id derived from the token and the name, `EtcdLease::of_grant`); the
//! fencing token is the revision of the transaction that put it. Every kind's lease is extended here (one etcd
//! lease per grant, whatever key it carries), and released here unless its kind leaves more
//! behind (the fair lock's queue entry, a waiting writer's record).

use std::time::Duration;

use etcd_client::{
    Client, Compare, CompareOp, DeleteOptions, PutOptions, Txn, TxnOp, TxnOpResponse, TxnResponse,
};
use lock_core::backend::{Attempt, Handover};
use lock_core::{Kind, Lease, LockError, Op, TimeoutPhase, Token, valid_until};
use tokio::time::Instant;

use crate::error::bounded;
use crate::executor::{Executor, put_on, read, revision};
use crate::layout::{self, EtcdLease, held, note_key, stamp, unstamp};
use crate::shared_lease::Shared;

/// One attempt at the mutex `name` for a renewed grant: one transaction (no lease grant): if
/// the key's `create_revision` is 0, put the token on the shared etcd lease of `ttl`, else read
/// the holder. The grant is valid for `ttl` or until the shared lease may run out, whichever
/// is first. A shared lease etcd no longer has is forgotten and the attempt made once more on
/// a new one.
pub(crate) async fn try_acquire_shared(
    exec: &Executor,
    name: &str,
    token: Token,
    ttl: Duration,
) -> Result<Attempt, LockError> {
    let started = Instant::now();
    let client = exec.client().await?;
    let (answer, shared) = match put_on_shared(exec, &client, name, &token, ttl).await {
        Err((_, Some(gone))) => {
            exec.shared.forget(gone);
            put_on_shared(exec, &client, name, &token, ttl)
                .await
                .map_err(|(error, _)| error)?
        }
        other => other.map_err(|(error, _)| error)?,
    };
    if answer.succeeded() {
        let fencing = revision(Op::Acquire, &answer)?;
        let until = valid_until(started, ttl).min(shared.expires());
        return Ok(Attempt::Acquired(Lease::new(name, token, fencing, until)));
    }
    Ok(exec.busy(&client, read(&answer, 0).as_ref(), false).await)
}

/// The grant transaction on the shared lease of `ttl` (the lock key and its grant time); on
/// error, the shared lease's id too when etcd said it does not have it.
async fn put_on_shared(
    exec: &Executor,
    client: &Client,
    name: &str,
    token: &Token,
    ttl: Duration,
) -> Result<(TxnResponse, Shared), (LockError, Option<i64>)> {
    let key = exec.key(name);
    let key = key.as_slice();
    let timeout = exec.command_timeout();
    let shared = (exec.shared)
        .fresh(client, Op::Acquire, ttl, timeout)
        .await
        .map_err(|error| (error, None))?;
    let put = TxnOp::put(
        key.to_vec(),
        layout::value(token),
        Some(PutOptions::new().with_lease(shared.id)),
    );
    let txn = Txn::new()
        .when([Compare::create_revision(key.to_vec(), CompareOp::Equal, 0)])
        .and_then([put, stamp(exec.prefix(), name, token, shared.id)])
        .or_else([TxnOp::get(key.to_vec(), None)]);
    match exec.txn(client, Op::Acquire, txn).await {
        Ok(answer) => Ok((answer, shared)),
        Err(error) => {
            let gone = error.to_string().contains("lease not found")
                || matches!(&error, LockError::Backend { source, .. }
                    if source.to_string().contains("lease not found"));
            Err((error, gone.then_some(shared.id)))
        }
    }
}

/// One attempt at the mutex `name`: the holder's etcd lease, then one transaction: if the key's
/// `create_revision` is 0 (absent), put the token on that lease, else read the holder.
pub(crate) async fn try_acquire(
    exec: &Executor,
    name: &str,
    token: Token,
    ttl: Duration,
) -> Result<Attempt, LockError> {
    let started = Instant::now();
    let client = exec.client().await?;
    let (key, etcd_lease) = (exec.key(name), EtcdLease::of_grant(&token, name));
    exec.grant_etcd_lease(&client, Op::Acquire, etcd_lease, ttl)
        .await?;
    let txn = Txn::new()
        .when([Compare::create_revision(key.clone(), CompareOp::Equal, 0)])
        .and_then([
            put_on(key.clone(), &token, etcd_lease),
            stamp(exec.prefix(), name, &token, etcd_lease.id()),
        ])
        .or_else([TxnOp::get(key, None)]);
    let answer = exec.txn(&client, Op::Acquire, txn).await?;
    if answer.succeeded() {
        let fencing = revision(Op::Acquire, &answer)?;
        return Ok(Attempt::Acquired(Lease::new(
            name,
            token,
            fencing,
            valid_until(started, ttl),
        )));
    }
    exec.revoke_etcd_lease_later(&client, etcd_lease);
    Ok(exec.busy(&client, read(&answer, 0).as_ref(), false).await)
}

/// Extends `lease`, of any kind, on the etcd lease of its own grant: a keep-alive of that etcd
/// lease, and a check that its key still holds its value, side by side. (Grants on the shared
/// lease are extended by `renew.rs`, which sends the rest here.)
pub(crate) async fn extend(
    exec: &Executor,
    lease: &Lease,
    ttl: Duration,
) -> Result<Option<Instant>, LockError> {
    let started = Instant::now();
    let client = exec.client().await?;
    let (key, stored) = held(exec.prefix(), lease);
    let etcd_lease = EtcdLease::of_grant(lease.token(), lease.name());
    let ours = Txn::new().when([Compare::value(key, CompareOp::Equal, stored)]);
    let mut leases = client.lease_client();
    let (ours, kept, granted) = tokio::join!(
        exec.txn(&client, Op::Extend, ours),
        bounded(
            Op::Extend,
            TimeoutPhase::Command,
            exec.command_timeout(),
            async {
                match leases.keep_alive(etcd_lease.id()).await {
                    Ok((_keeper, mut stream)) => {
                        // `keep_alive` has read the first answer; the stream is dropped here.
                        drop(stream.message());
                        Ok(true)
                    }
                    Err(etcd_client::Error::LeaseKeepAliveError(_)) => Ok(false),
                    Err(err) => Err(err),
                }
            }
        ),
        granted_ttl(&client, etcd_lease, exec.command_timeout()),
    );
    if !(ours?.succeeded() && kept?) {
        return Ok(None);
    }
    // A keep-alive restores the TTL the etcd lease was granted with; a longer one asked now is
    // capped at it (see the README), so the validity never outlasts the key.
    Ok(Some(valid_until(
        started,
        granted.map_or(ttl, |g| ttl.min(g)),
    )))
}

/// The TTL `etcd_lease` was granted with, if etcd says (`None` when it does not answer in
/// time: the caller then trusts the TTL it asked for at the grant, which the etcd lease was
/// given).
async fn granted_ttl(
    client: &Client,
    etcd_lease: EtcdLease,
    timeout: Duration,
) -> Option<Duration> {
    let mut leases = client.lease_client();
    let asked = leases.time_to_live(etcd_lease.id(), None);
    match tokio::time::timeout(timeout, asked).await {
        Ok(Ok(answer)) if answer.granted_ttl() > 0 => Some(Duration::from_secs(
            u64::try_from(answer.granted_ttl()).ok()?,
        )),
        _ => None,
    }
}

/// Releases `lease` (the mutex, a reader, a semaphore holder, a writer without preference):
/// one transaction (if its key holds its value, delete the key, its grant time and, for the
/// mutex, its note key). The grant's own etcd lease is revoked in the background only when the key was on it
/// (`prev_kv`: a fixed grant) or the key was not ours (an attempt dropped after the lease
/// grant): a key on the shared lease costs no second request.
///
/// A release that fails for a reason that may pass is sent again in the background until etcd
/// answers (see [`send_release`] for why), and the own lease revoked likewise.
pub(crate) async fn release(exec: &Executor, lease: &Lease) -> Result<bool, LockError> {
    let client = exec.client().await?;
    let (key, stored) = held(exec.prefix(), lease);
    let mut ops = vec![
        TxnOp::delete(key.clone(), Some(DeleteOptions::new().with_prev_key())),
        unstamp(exec.prefix(), lease.name(), lease.token()),
    ];
    if matches!(lease.kind(), Kind::Mutex) {
        ops.push(TxnOp::delete(note_key(exec.prefix(), lease.name()), None));
    }
    let txn = Txn::new()
        .when([Compare::value(key, CompareOp::Equal, stored)])
        .and_then(ops);
    let own = EtcdLease::of_grant(lease.token(), lease.name());
    match exec.txn(&client, Op::Release, txn.clone()).await {
        Ok(answer) => {
            if !answer.succeeded() || deleted_from(&answer) == Some(own.id()) {
                exec.revoke_etcd_lease_later(&client, own);
            }
            Ok(answer.succeeded())
        }
        Err(error) => {
            if error.is_retryable() {
                exec.revoke_etcd_lease_until_gone(own);
                exec.send_until_answered(txn);
            }
            Err(error)
        }
    }
}

/// The etcd lease of the key the first operation of `answer`'s branch deleted (`prev_kv`).
fn deleted_from(answer: &TxnResponse) -> Option<i64> {
    match answer.op_responses().into_iter().next()? {
        TxnOpResponse::Delete(deleted) => deleted.prev_kvs().first().map(|kv| kv.lease()),
        _ => None,
    }
}

/// Sends the release transaction `txn` of `lease`, then revokes the etcd lease of its grant in
/// the background: whether the transaction found the lease ours.
///
/// When the transaction fails for a reason that may pass (the cluster restarting, say), the
/// grant's etcd lease is revoked in the background as soon as the cluster answers: etcd
/// restarts every lease's countdown when a leader is elected, so the key of a holder whose
/// release failed could otherwise outlive its TTL by a countdown per election. Revoking it
/// removes only this grant's keys (its lock key and note), whoever holds the lock by then.
pub(crate) async fn send_release(
    exec: &Executor,
    client: &Client,
    lease: &Lease,
    txn: Txn,
) -> Result<bool, LockError> {
    let etcd_lease = EtcdLease::of_grant(lease.token(), lease.name());
    match exec.txn(client, Op::Release, txn).await {
        Ok(answer) => {
            exec.revoke_etcd_lease_later(client, etcd_lease);
            Ok(answer.succeeded())
        }
        Err(error) => {
            if error.is_retryable() {
                exec.revoke_etcd_lease_until_gone(etcd_lease);
            }
            Err(error)
        }
    }
}

/// Hands the mutex `lease` over to `to`: an etcd lease for the new token, then one transaction
/// (if the value is the old token, put the new one on the new etcd lease): a new revision, so a new
/// fencing token.
pub(crate) async fn hand_over(
    exec: &Executor,
    lease: &Lease,
    to: Token,
    ttl: Duration,
) -> Result<Handover, LockError> {
    let started = Instant::now();
    let client = exec.client().await?;
    let key = exec.key(lease.name());
    let etcd_lease = EtcdLease::of_grant(&to, lease.name());
    exec.grant_etcd_lease(&client, Op::Acquire, etcd_lease, ttl)
        .await?;
    let txn = Txn::new()
        .when([Compare::value(
            key.clone(),
            CompareOp::Equal,
            layout::value(lease.token()),
        )])
        .and_then([
            put_on(key, &to, etcd_lease),
            stamp(exec.prefix(), lease.name(), &to, etcd_lease.id()),
            // The old grant's note and time: on the shared lease they would not go with a
            // revoke.
            TxnOp::delete(note_key(exec.prefix(), lease.name()), None),
            unstamp(exec.prefix(), lease.name(), lease.token()),
        ]);
    let answer = exec.txn(&client, Op::Acquire, txn).await?;
    if !answer.succeeded() {
        exec.revoke_etcd_lease_later(&client, etcd_lease);
        return Ok(Handover::NotOwned);
    }
    exec.revoke_etcd_lease_later(&client, EtcdLease::of_grant(lease.token(), lease.name()));
    let fencing = revision(Op::Acquire, &answer)?;
    Ok(Handover::Handed(Lease::new(
        lease.name(),
        to,
        fencing,
        valid_until(started, ttl),
    )))
}
