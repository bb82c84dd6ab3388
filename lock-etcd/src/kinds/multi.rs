//! The multi-lock: every name's mutex in one transaction, so a set of names is granted whole
//! or not at all, with one fencing token (the transaction's revision) for every lease.

use std::sync::Arc;
use std::time::Duration;

use etcd_client::{Compare, CompareOp, GetOptions, Txn, TxnOp};
use futures::future::join_all;
use lock_core::backend::MultiAttempt;
use lock_core::{Lease, LockError, Op, Token, valid_until};
use tokio::time::Instant;

use crate::executor::{Executor, put_on, read, revision};
use crate::layout::lease_id;

/// One attempt at every name of `names`: each name's lease, then one transaction over every
/// key (if none exists, put each on its lease; else read them all, for the first holder).
pub(crate) async fn try_acquire_all(
    exec: &Executor,
    names: &[Arc<str>],
    token: Token,
    ttl: Duration,
) -> Result<MultiAttempt, LockError> {
    let started = Instant::now();
    let client = exec.client().await?;
    let ids: Vec<i64> = names.iter().map(|n| lease_id(&token, n)).collect();
    let granted = join_all(
        ids.iter()
            .map(|id| exec.grant(&client, Op::Acquire, *id, ttl)),
    )
    .await;
    if let Some(Err(err)) = granted.into_iter().find(Result::is_err) {
        for id in &ids {
            exec.revoke_later(&client, *id);
        }
        return Err(err);
    }
    let keys: Vec<Vec<u8>> = names.iter().map(|n| exec.key(n)).collect();
    let answer = exec
        .txn(&client, Op::Acquire, all_or_none(&keys, &ids, &token))
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
    for id in &ids {
        exec.revoke_later(&client, *id);
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

/// The transaction: if no key of `keys` exists, put `token` under each on its lease of `ids`;
/// else read every key.
fn all_or_none(keys: &[Vec<u8>], ids: &[i64], token: &Token) -> Txn {
    Txn::new()
        .when(
            keys.iter()
                .map(|k| Compare::create_revision(k.clone(), CompareOp::Equal, 0))
                .collect::<Vec<_>>(),
        )
        .and_then(
            keys.iter()
                .zip(ids)
                .map(|(k, id)| put_on(k.clone(), token, *id))
                .collect::<Vec<_>>(),
        )
        .or_else(
            keys.iter()
                .map(|k| TxnOp::get(k.clone(), Some(GetOptions::new())))
                .collect::<Vec<_>>(),
        )
}
