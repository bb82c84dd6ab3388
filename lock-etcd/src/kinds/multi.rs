//! The multi-lock: every name's mutex in one transaction, so a set of names is granted whole
//! or not at all, with one fencing token (the transaction's revision) for every lease.
//!
//! Its grants write no grant time (`layout::granted_key`): a put per name more would halve the
//! names one transaction can take (etcd's `--max-txn-ops`, 128 by default).

use std::sync::Arc;
use std::time::Duration;

use etcd_client::{Compare, CompareOp, GetOptions, Txn, TxnOp};
use futures::future::join_all;
use lock_core::backend::MultiAttempt;
use lock_core::{Lease, LockError, Op, Token, valid_until};
use tokio::time::Instant;

use crate::executor::{Executor, put_on, read, revision};
use crate::layout::EtcdLease;

/// One attempt at every name of `names`: each name's etcd lease, then one transaction over
/// every key (if none exists, put each on its etcd lease; else read them all, for the first
/// holder).
pub(crate) async fn try_acquire_all(
    exec: &Executor,
    names: &[Arc<str>],
    token: Token,
    ttl: Duration,
) -> Result<MultiAttempt, LockError> {
    let started = Instant::now();
    let client = exec.client().await?;
    let etcd_leases: Vec<EtcdLease> = names
        .iter()
        .map(|n| EtcdLease::of_grant(&token, n))
        .collect();
    let granted = join_all(
        etcd_leases
            .iter()
            .map(|etcd_lease| exec.grant_etcd_lease(&client, Op::Acquire, *etcd_lease, ttl)),
    )
    .await;
    if let Some(Err(err)) = granted.into_iter().find(Result::is_err) {
        for etcd_lease in &etcd_leases {
            exec.revoke_etcd_lease_later(&client, *etcd_lease);
        }
        return Err(err);
    }
    let keys: Vec<Vec<u8>> = names.iter().map(|n| exec.key(n)).collect();
    let answer = exec
        .txn(
            &client,
            Op::Acquire,
            all_or_none(&keys, &etcd_leases, &token),
        )
        .await?;
    if answer.succeeded() {
        let fencing = revision(Op::Acquire, &answer)?;
        let until = valid_until(started, ttl);
        return Ok(MultiAttempt::Acquired(
            names
                .iter()
                .map(|n| Lease::new(Arc::clone(n), token, fencing, until))
                .collect(),
        ));
    }
    for etcd_lease in &etcd_leases {
        exec.revoke_etcd_lease_later(&client, *etcd_lease);
    }
    let index = (0..names.len())
        .find(|i| read(&answer, *i).is_some())
        .unwrap_or(0);
    let (holder_ttl, announces) = exec
        .holder_state(&client, read(&answer, index).as_ref())
        .await;
    Ok(MultiAttempt::Busy {
        index,
        holder_ttl,
        announces,
    })
}

/// The transaction: if no key of `keys` exists, put `token` under each on its etcd lease of
/// `etcd_leases`; else read every key.
fn all_or_none(keys: &[Vec<u8>], etcd_leases: &[EtcdLease], token: &Token) -> Txn {
    Txn::new()
        .when(
            keys.iter()
                .map(|k| Compare::create_revision(k.clone(), CompareOp::Equal, 0))
                .collect::<Vec<_>>(),
        )
        .and_then(
            keys.iter()
                .zip(etcd_leases)
                .map(|(k, etcd_lease)| put_on(k.clone(), token, *etcd_lease))
                .collect::<Vec<_>>(),
        )
        .or_else(
            keys.iter()
                .map(|k| TxnOp::get(k.clone(), Some(GetOptions::new())))
                .collect::<Vec<_>>(),
        )
}
