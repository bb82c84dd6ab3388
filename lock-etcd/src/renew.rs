//! The watchdog's batch (`extend_many`): every shared etcd lease kept alive once (when it was
//! not recently, `shared.rs`) and, side by side, one read of every mutex key of the batch. A
//! grant on a shared lease is kept only when its key is still there, still carries its token,
//! and sits on a shared lease etcd kept alive: a key deleted by `distlock release --force`, by
//! an operator or with its lease is seen lost in the batch that follows, which fires `lost()`.
//! A mutex key on a bucket lease (a grant of a fixed TTL, a hand-over) moves to a lease of its
//! own (`moving.rs`); keys on a lease of their own (such a grant extended before, a multi-lock)
//! and the other kinds go through the per-lease extend (`kinds/mutex.rs`).

use std::time::Duration;

use etcd_client::{Client, Txn, TxnOp};
use lock_core::{Kind, Lease, LockError, Op, valid_until};
use tokio::time::Instant;

use crate::executor::{Executor, read};
use crate::kinds::mutex;
use crate::layout::held;
use crate::moving;
use crate::shared_lease::Shared;

/// The most keys read in one transaction: etcd's default `--max-txn-ops`.
const READS_PER_TXN: usize = 128;

/// What one lease of the batch needs: kept on a shared lease, lost, a move off the bucket
/// lease of this id, or the per-lease extend.
enum Found {
    Kept(Instant),
    Lost,
    Move(i64),
    OwnLease,
    Failed(LockError),
}

/// Extends every lease of `leases`, answering for each in order; see the module docs.
pub(crate) async fn extend_many(
    exec: &Executor,
    leases: &[(Lease, Duration)],
) -> Vec<Result<Option<Instant>, LockError>> {
    let started = Instant::now();
    let found = match exec.client().await {
        Ok(client) => check(exec, &client, leases, started).await,
        Err(_) => leases.iter().map(|_| Found::OwnLease).collect(),
    };
    let answers = leases
        .iter()
        .zip(found)
        .map(|((lease, ttl), found)| async move {
            match found {
                Found::Kept(until) => Ok(Some(until)),
                Found::Lost => Ok(None),
                Found::Failed(error) => Err(error),
                Found::Move(bucket) => moving::extend(exec, lease, *ttl, bucket).await,
                Found::OwnLease => mutex::extend(exec, lease, *ttl).await,
            }
        });
    futures::future::join_all(answers).await
}

/// The shared leases kept alive and the mutex keys read, side by side; then each lease's fate.
async fn check(
    exec: &Executor,
    client: &Client,
    leases: &[(Lease, Duration)],
    started: Instant,
) -> Vec<Found> {
    let mutexes: Vec<usize> = (0..leases.len())
        .filter(|&i| matches!(leases[i].0.kind(), Kind::Mutex))
        .collect();
    if mutexes.is_empty() {
        return leases.iter().map(|_| Found::OwnLease).collect();
    }
    let timeout = exec.command_timeout();
    let renewals = exec
        .shared
        .ttls()
        .into_iter()
        .map(|seconds| async move { exec.shared.renew(client, seconds, timeout).await });
    let reads = mutexes.chunks(READS_PER_TXN).map(|chunk| {
        let gets = chunk.iter().map(|&i| {
            let (key, _) = held(exec.prefix(), &leases[i].0);
            TxnOp::get(key, None)
        });
        exec.txn(
            client,
            Op::Extend,
            Txn::new().and_then(gets.collect::<Vec<_>>()),
        )
    });
    let (renewed, read_back) = tokio::join!(
        futures::future::join_all(renewals),
        futures::future::join_all(reads)
    );
    let mut kept: Vec<Shared> = Vec::new();
    let mut renewal_error = None;
    for shared in renewed {
        match shared {
            Ok(Some(shared)) => kept.push(shared),
            Ok(None) => {}
            Err(error) => renewal_error = Some(error),
        }
    }
    let mut found: Vec<Found> = leases.iter().map(|_| Found::OwnLease).collect();
    for (chunk, answer) in mutexes.chunks(READS_PER_TXN).zip(read_back) {
        for (n, &i) in chunk.iter().enumerate() {
            found[i] = match &answer {
                Ok(answer) => judge(
                    exec,
                    &leases[i],
                    read(answer, n),
                    &kept,
                    started,
                    &renewal_error,
                ),
                Err(error) => Found::Failed(copy_error(error)),
            };
        }
    }
    found
}

/// The fate of one mutex lease from its key as read (`kv`) and the shared leases kept alive.
fn judge(
    exec: &Executor,
    (lease, ttl): &(Lease, Duration),
    kv: Option<etcd_client::KeyValue>,
    kept: &[Shared],
    started: Instant,
    renewal_error: &Option<LockError>,
) -> Found {
    let Some(kv) = kv else {
        return Found::Lost;
    };
    let (_, stored) = held(exec.prefix(), lease);
    if kv.value() != stored.as_slice() {
        return Found::Lost;
    }
    if let Some(shared) = kept.iter().find(|s| s.id == kv.lease()) {
        return Found::Kept(valid_until(started, *ttl).min(shared.expires()));
    }
    if let Some(shared) = exec.shared.by_id(kv.lease()) {
        // A shared lease not kept alive by this batch: its keep-alive failed, or it was
        // granted after the batch began (fresh then).
        return match renewal_error {
            Some(error) => Found::Failed(copy_error(error)),
            None => Found::Kept(valid_until(started, *ttl).min(shared.expires())),
        };
    }
    if exec.fixed.by_id(kv.lease()).is_some() {
        return Found::Move(kv.lease());
    }
    if kv.lease() == crate::layout::EtcdLease::of_grant(lease.token(), lease.name()).id() {
        return Found::OwnLease;
    }
    // On a shared lease this process no longer knows (etcd said it is gone), or a bucket lease
    // past its end as this process counts, so past the grant's validity.
    Found::Lost
}

/// The same error again, for each lease of a failed request: a timeout keeps its phase and
/// time, anything else is a backend error with the same message.
fn copy_error(error: &LockError) -> LockError {
    match error {
        LockError::Timeout { phase, elapsed } => LockError::Timeout {
            phase: *phase,
            elapsed: *elapsed,
        },
        other => LockError::Backend {
            backend: crate::error::BACKEND,
            op: Op::Extend,
            retryable: other.is_retryable(),
            source: other.to_string().into(),
        },
    }
}
