//! The mutex: one holder, its `dl:` token under the lock key, on the shared etcd lease of
//! renewed grants (`shared_lease.rs`) or, for a grant of a fixed TTL and a hand-over, on the
//! bucket lease of its TTL (`fixed_lease.rs`); once extended by hand, on an etcd lease of the
//! holder's own (its id derived from the token and the name, `EtcdLease::of_grant`;
//! `moving.rs`). The fencing token is the revision of the transaction that put it. Every
//! kind's lease on an etcd lease of its own is extended here, whatever key it carries, and
//! released here unless its kind leaves more behind (the fair lock's queue entry, a waiting
//! writer's record).

use std::future::Future;
use std::time::Duration;

use etcd_client::{
    Client, Compare, CompareOp, DeleteOptions, PutOptions, Txn, TxnOp, TxnOpResponse, TxnResponse,
};
use lock_core::backend::{Attempt, Handover};
use lock_core::{Kind, Lease, LockError, Op, TimeoutPhase, Token, valid_until};
use tokio::time::Instant;

use crate::error::bounded;
use crate::executor::{Executor, read, revision};
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
    let (answer, shared) = on_lease(
        exec,
        &client,
        || (exec.shared).fresh(&client, Op::Acquire, ttl, exec.command_timeout()),
        |gone| exec.shared.forget(gone),
        |shared| grant_txn(exec, name, &token, shared.id),
    )
    .await?;
    granted_or_busy(
        exec,
        &client,
        name,
        token,
        valid_until(started, ttl),
        answer,
        shared,
    )
    .await
}

/// One attempt at the mutex `name` for a grant of a fixed TTL: one transaction, as
/// [`try_acquire_shared`], on the bucket lease of `ttl` (`fixed_lease.rs`), which is granted
/// first only when the current one would end before this grant's validity. Never kept alive:
/// the key goes by itself at most a bucket after the TTL. A bucket lease etcd no longer has is
/// forgotten and the attempt made once more on a new one.
pub(crate) async fn try_acquire(
    exec: &Executor,
    name: &str,
    token: Token,
    ttl: Duration,
) -> Result<Attempt, LockError> {
    let started = Instant::now();
    let client = exec.client().await?;
    let (answer, bucket) = on_lease(
        exec,
        &client,
        || (exec.fixed).for_grant(&client, ttl, started, exec.command_timeout()),
        |gone| exec.fixed.forget(gone),
        |bucket| grant_txn(exec, name, &token, bucket.id),
    )
    .await?;
    granted_or_busy(
        exec,
        &client,
        name,
        token,
        valid_until(started, ttl),
        answer,
        bucket,
    )
    .await
}

/// The lease of a grant `answer` committed on the etcd lease `on`, valid until `until` or
/// until `on` may run out, whichever is first; else the busy answer for the holder it read.
async fn granted_or_busy(
    exec: &Executor,
    client: &Client,
    name: &str,
    token: Token,
    until: Instant,
    answer: TxnResponse,
    on: Shared,
) -> Result<Attempt, LockError> {
    if answer.succeeded() {
        let fencing = revision(Op::Acquire, &answer)?;
        let until = until.min(on.expires());
        return Ok(Attempt::Acquired(Lease::new(name, token, fencing, until)));
    }
    Ok(exec.busy(client, read(&answer, 0).as_ref(), false).await)
}

/// Sends the transaction `txn` builds for an etcd lease from `lease_for` (a shared lease, or
/// a bucket lease); when etcd answers that the lease is gone, `forget`s it and sends once more
/// on a new one. What every transaction that puts a mutex key on a lease this process shares
/// does: the renewed grant, the fixed grant and the hand-over.
async fn on_lease<LeaseFor>(
    exec: &Executor,
    client: &Client,
    lease_for: impl Fn() -> LeaseFor,
    forget: impl Fn(i64),
    txn: impl Fn(Shared) -> Txn,
) -> Result<(TxnResponse, Shared), LockError>
where
    LeaseFor: Future<Output = Result<Shared, LockError>>,
{
    let lease = lease_for().await?;
    match exec.txn(client, Op::Acquire, txn(lease)).await {
        Ok(answer) => Ok((answer, lease)),
        Err(error) if lease_not_found(&error) => {
            forget(lease.id);
            let lease = lease_for().await?;
            let answer = exec.txn(client, Op::Acquire, txn(lease)).await?;
            Ok((answer, lease))
        }
        Err(error) => Err(error),
    }
}

/// The grant transaction of `name` on the etcd lease `on`: the lock key and its grant time, if
/// the key's `create_revision` is 0; else a read of the holder.
fn grant_txn(exec: &Executor, name: &str, token: &Token, on: i64) -> Txn {
    let key = exec.key(name);
    let put = TxnOp::put(
        key.clone(),
        layout::value(token),
        Some(PutOptions::new().with_lease(on)),
    );
    Txn::new()
        .when([Compare::create_revision(key.clone(), CompareOp::Equal, 0)])
        .and_then([put, stamp(exec.prefix(), name, token, on)])
        .or_else([TxnOp::get(key, None)])
}

/// Whether etcd refused a request because an etcd lease it names does not exist (any more).
pub(crate) fn lease_not_found(error: &LockError) -> bool {
    error.to_string().contains("lease not found")
        || matches!(error, LockError::Backend { source, .. }
            if source.to_string().contains("lease not found"))
}

/// Extends `lease`, of any kind, on the etcd lease of its own grant: a keep-alive of that etcd
/// lease, and a check that its key still holds its value, side by side. (Grants on the shared
/// lease are extended by `renew.rs`, and grants on a bucket lease moved by `moving.rs`; the
/// rest come here.)
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
/// mutex, its note key). The grant's own etcd lease is revoked in the background only when
/// the key was on it (`prev_kv`: a mutex grant extended by hand, a grant of another kind) or
/// the key was not ours (an attempt dropped after its lease grant): a key on the shared lease
/// or a bucket lease costs no second request.
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

/// Hands the mutex `lease` over to `to`: one transaction (if the value is the old token, put
/// the new one on the bucket lease of `ttl`, as a grant of a fixed TTL: the `Locker` may
/// renew the new holder or not, and a renewal moves it to a lease of its own, `moving.rs`): a
/// new revision, so a new fencing token. The old grant's own etcd lease, if its key was on
/// one, is revoked in the background. A bucket lease etcd no longer has is forgotten and the
/// hand-over tried once more on a new one.
pub(crate) async fn hand_over(
    exec: &Executor,
    lease: &Lease,
    to: Token,
    ttl: Duration,
) -> Result<Handover, LockError> {
    let started = Instant::now();
    let client = exec.client().await?;
    let (answer, bucket) = on_lease(
        exec,
        &client,
        || (exec.fixed).for_grant(&client, ttl, started, exec.command_timeout()),
        |gone| exec.fixed.forget(gone),
        |bucket| hand_over_txn(exec, lease, &to, bucket.id),
    )
    .await?;
    if !answer.succeeded() {
        return Ok(Handover::NotOwned);
    }
    let old = EtcdLease::of_grant(lease.token(), lease.name());
    if replaced_from(&answer) == Some(old.id()) {
        exec.revoke_etcd_lease_later(&client, old);
    }
    let fencing = revision(Op::Acquire, &answer)?;
    Ok(Handover::Handed(Lease::new(
        lease.name(),
        to,
        fencing,
        valid_until(started, ttl).min(bucket.expires()),
    )))
}

/// The hand-over transaction of `lease` to `to` on the etcd lease `on`.
fn hand_over_txn(exec: &Executor, lease: &Lease, to: &Token, on: i64) -> Txn {
    let key = exec.key(lease.name());
    let put = TxnOp::put(
        key.clone(),
        layout::value(to),
        Some(PutOptions::new().with_lease(on).with_prev_key()),
    );
    Txn::new()
        .when([Compare::value(
            key,
            CompareOp::Equal,
            layout::value(lease.token()),
        )])
        .and_then([
            put,
            stamp(exec.prefix(), lease.name(), to, on),
            // The old grant's note and time: on a shared lease they would not go with a
            // revoke.
            TxnOp::delete(note_key(exec.prefix(), lease.name()), None),
            unstamp(exec.prefix(), lease.name(), lease.token()),
        ])
}

/// The etcd lease of the key the first operation of `answer`'s branch replaced (`prev_kv`).
fn replaced_from(answer: &TxnResponse) -> Option<i64> {
    match answer.op_responses().into_iter().next()? {
        TxnOpResponse::Put(put) => put.prev_key().map(etcd_client::KeyValue::lease),
        _ => None,
    }
}
