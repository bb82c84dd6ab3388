//! The read-write lock: the writer is the name's lock key, each reader a key of its own.
//!
//! - A reader of `name` is `prefix + "\0rwr/" + len(name) + ":" + name + "/" + token` on the
//!   reader's own etcd lease. A read attempt is one transaction: if the lock key is absent (no
//!   writer) and, with writer preference, no waiting-writer record exists, put the reader's
//!   key. Its fencing token is the last write's: the revision of the fence key
//!   `prefix + "\0rwf/" + len(name) + ":" + name + "/"`, which every write grant puts (0 when the
//!   name was never written).
//! - A write attempt is one transaction: if the lock key is absent and no reader key exists,
//!   put the lock key on the writer's etcd lease and the fence key, and delete the writer's
//!   waiting record; else, with writer preference, put (or keep) the waiting record
//!   `prefix + "\0rww/" + … + token` on an etcd lease of its own that lasts the attempt's TTL, so new
//!   readers are refused until the writer gets in, gives up (its token's release deletes the
//!   record) or stops trying (the record lapses).
//!
//! The fence key holds nothing and has no etcd lease: one key per name ever write-locked, like
//! lock-redis's fencing counter.

use std::time::Duration;

use etcd_client::{Compare, CompareOp, GetOptions, Txn, TxnOp};
use lock_core::backend::Attempt;
use lock_core::{Kind, Lease, LockError, Op, Token, valid_until};
use tokio::time::Instant;

use super::mutex;
use crate::executor::{Executor, put_on_value, read, revision};
use crate::layout::{
    EtcdLease, FENCE, READERS, WAITING, held, range_end, reader_key, stamp, under, unstamp, value,
    waiting_key,
};

/// "No key in the range of `name` under `mark`": a range compare on `version == 0`.
fn none_under(mark: &[u8], prefix: &str, name: &str) -> Compare {
    let start = under(mark, prefix, name);
    let end = range_end(&start);
    Compare::version(start, CompareOp::Equal, 0).with_range(end)
}

/// The first key of `name` under `mark`.
fn first_under(mark: &[u8], prefix: &str, name: &str) -> TxnOp {
    let start = under(mark, prefix, name);
    let end = range_end(&start);
    TxnOp::get(start, Some(GetOptions::new().with_range(end).with_limit(1)))
}

/// One read attempt; see the module docs.
pub(crate) async fn try_read(
    exec: &Executor,
    name: &str,
    writer_preference: bool,
    token: Token,
    ttl: Duration,
) -> Result<Attempt, LockError> {
    let started = Instant::now();
    let client = exec.client().await?;
    let etcd_lease = EtcdLease::of_grant(&token, name);
    exec.grant_etcd_lease(&client, Op::Acquire, etcd_lease, ttl)
        .await?;
    let prefix = exec.prefix();
    let lock_key = exec.key(name);
    let mut when = vec![Compare::create_revision(
        lock_key.clone(),
        CompareOp::Equal,
        0,
    )];
    if writer_preference {
        when.push(none_under(WAITING, prefix, name));
    }
    let txn = Txn::new()
        .when(when)
        .and_then([
            put_on_value(reader_key(prefix, name, &token), value(&token), etcd_lease),
            TxnOp::get(under(FENCE, prefix, name), None),
            stamp(prefix, name, &token, etcd_lease.id()),
        ])
        .or_else([
            TxnOp::get(lock_key, None),
            first_under(WAITING, prefix, name),
        ]);
    let answer = exec.txn(&client, Op::Acquire, txn).await?;
    if answer.succeeded() {
        let fencing = read(&answer, 1)
            .and_then(|kv| u64::try_from(kv.mod_revision()).ok())
            .unwrap_or(0);
        let lease = Lease::new(name, token, fencing, valid_until(started, ttl))
            .with_kind(Kind::Read { writer_preference });
        return Ok(Attempt::Acquired(lease));
    }
    exec.revoke_etcd_lease_later(&client, etcd_lease);
    // Behind a writer: its TTL; behind a waiting writer only: its record's.
    let holder = read(&answer, 0).or_else(|| read(&answer, 1));
    Ok(exec.busy(&client, holder.as_ref(), true).await)
}

/// One write attempt; see the module docs.
pub(crate) async fn try_write(
    exec: &Executor,
    name: &str,
    writer_preference: bool,
    token: Token,
    ttl: Duration,
) -> Result<Attempt, LockError> {
    let started = Instant::now();
    let client = exec.client().await?;
    let etcd_lease = EtcdLease::of_grant(&token, name);
    let record_etcd_lease = EtcdLease::of_waiting_record(&token, name);
    let prefix = exec.prefix();
    let waiting = waiting_key(prefix, name, &token);
    if writer_preference {
        let (granted, kept) = tokio::join!(
            exec.grant_etcd_lease(&client, Op::Acquire, etcd_lease, ttl),
            exec.keep_or_grant_etcd_lease(record_etcd_lease, ttl),
        );
        granted?;
        kept?;
    } else {
        exec.grant_etcd_lease(&client, Op::Acquire, etcd_lease, ttl)
            .await?;
    }
    let lock_key = exec.key(name);
    let mut otherwise = vec![
        TxnOp::get(lock_key.clone(), None),
        first_under(READERS, prefix, name),
    ];
    if writer_preference {
        otherwise.push(put_on_value(
            waiting.clone(),
            value(&token),
            record_etcd_lease,
        ));
    }
    let txn = Txn::new()
        .when([
            Compare::create_revision(lock_key.clone(), CompareOp::Equal, 0),
            none_under(READERS, prefix, name),
        ])
        .and_then([
            put_on_value(lock_key, value(&token), etcd_lease),
            TxnOp::put(under(FENCE, prefix, name), Vec::new(), None),
            TxnOp::delete(waiting, None),
            stamp(prefix, name, &token, etcd_lease.id()),
        ])
        .or_else(otherwise);
    let answer = exec.txn(&client, Op::Acquire, txn).await?;
    if answer.succeeded() {
        if writer_preference {
            exec.revoke_etcd_lease_later(&client, record_etcd_lease);
        }
        let fencing = revision(Op::Acquire, &answer)?;
        let lease = Lease::new(name, token, fencing, valid_until(started, ttl))
            .with_kind(Kind::Write { writer_preference });
        return Ok(Attempt::Acquired(lease));
    }
    exec.revoke_etcd_lease_later(&client, etcd_lease);
    let holder = read(&answer, 0).or_else(|| read(&answer, 1));
    Ok(exec.busy(&client, holder.as_ref(), true).await)
}

/// Releases the write `lease` of a writer with preference: one transaction (if the lock key
/// holds its token, delete it and the writer's waiting record; else delete the record alone),
/// the record's etcd lease revoked in the background: a waiting writer's record goes with its
/// token, granted or not.
pub(crate) async fn release_writer(exec: &Executor, lease: &Lease) -> Result<bool, LockError> {
    let client = exec.client().await?;
    let record = waiting_key(exec.prefix(), lease.name(), lease.token());
    exec.revoke_etcd_lease_later(
        &client,
        EtcdLease::of_waiting_record(lease.token(), lease.name()),
    );
    let (lock_key, stored) = held(exec.prefix(), lease);
    let txn = Txn::new()
        .when([Compare::value(lock_key.clone(), CompareOp::Equal, stored)])
        .and_then([
            TxnOp::delete(lock_key, None),
            TxnOp::delete(record.clone(), None),
            unstamp(exec.prefix(), lease.name(), lease.token()),
        ])
        .or_else([TxnOp::delete(record, None)]);
    mutex::send_release(exec, &client, lease, txn).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::name_of;

    #[test]
    fn readers_and_records_name_their_lock() {
        let token = Token::from_bytes([4; 16]);
        let reader = reader_key("p/", "x", &token);
        let record = waiting_key("p/", "x", &token);
        assert_eq!(name_of(b"p/", &reader), Some(&b"x"[..]));
        assert_eq!(name_of(b"p/", &record), Some(&b"x"[..]));
        assert_ne!(
            EtcdLease::of_waiting_record(&token, "x"),
            EtcdLease::of_grant(&token, "x")
        );
    }
}
