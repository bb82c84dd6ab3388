//! The counting semaphore: one key per holder, ranked by creation revision.
//!
//! A holder of `permits` of the `max` permits of `name` is the key
//! `prefix + "\0sem/" + len(name) + ":" + name + "/" + token`, holding
//! `dl:<token> <permits> <max>` on the holder's own etcd lease (the length makes the keys of two
//! names never share a range, whatever bytes the names hold). An attempt is one transaction
//! that puts the attempt's key and reads every holder key of the name, sorted by creation
//! revision; it is granted when the permits of the keys created before it, plus its own, fit
//! in `max`, and otherwise deletes its key again (busy).
//!
//! Why that is safe: take the holders granted at any moment, and the last of them by creation
//! revision. When it read, every other one already existed (each was created before it and is
//! still held), so their permits plus its own fit in `max`. Revision order is etcd's: no key
//! can appear later with a smaller creation revision. Expired holders vanish with their etcd lease,
//! so nothing needs pruning. The price: an attempt that turns out busy holds its key for one
//! round trip, during which a later attempt counts it (a spurious busy, retried; never an
//! excess grant).

use std::time::Duration;

use etcd_client::{DeleteOptions, GetOptions, SortOrder, SortTarget, Txn, TxnOp, TxnOpResponse};
use lock_core::backend::Attempt;
use lock_core::{Kind, Lease, LockError, Op, Token, valid_until};
use tokio::time::Instant;

use crate::executor::{Executor, put_on_value};
use crate::layout::{EtcdLease, holder_key, holder_value, holders, range_end, stamp};

/// The permits and `max` a holder's value says (`None` for a value this layout never writes).
fn parse(stored: &[u8]) -> Option<(u32, u32)> {
    let text = std::str::from_utf8(stored).ok()?;
    let mut parts = text.split(' ').skip(1);
    let permits = parts.next()?.parse().ok()?;
    let max = parts.next()?.parse().ok()?;
    Some((permits, max))
}

/// Every holder key of `name`, oldest first, read in one request (or as a transaction's op).
fn read_all(prefix: &str, name: &str) -> TxnOp {
    let start = holders(prefix, name);
    let options = GetOptions::new()
        .with_range(range_end(&start))
        .with_sort(SortTarget::Create, SortOrder::Ascend);
    TxnOp::get(start, Some(options))
}

/// One attempt at `permits` of `max` of `name`; see the module docs.
pub(crate) async fn try_acquire(
    exec: &Executor,
    name: &str,
    permits: u32,
    max: u32,
    token: Token,
    ttl: Duration,
) -> Result<Attempt, LockError> {
    let started = Instant::now();
    let client = exec.client().await?;
    let etcd_lease = EtcdLease::of_grant(&token, name);
    exec.grant_etcd_lease(&client, Op::Acquire, etcd_lease, ttl)
        .await?;
    let key = holder_key(exec.prefix(), name, &token);
    let txn = Txn::new().and_then([
        put_on_value(key.clone(), holder_value(&token, permits, max), etcd_lease),
        read_all(exec.prefix(), name),
        // A busy attempt's goes with its etcd lease, revoked below.
        stamp(exec.prefix(), name, &token, etcd_lease.id()),
    ]);
    let answer = exec.txn(&client, Op::Acquire, txn).await?;
    let holders = match answer.op_responses().into_iter().nth(1) {
        Some(TxnOpResponse::Get(get)) => get.kvs().to_vec(),
        _ => Vec::new(),
    };
    let mut before = 0_u64;
    let mut verdict = None;
    for holder in &holders {
        let Some((their_permits, their_max)) = parse(holder.value()) else {
            continue;
        };
        if their_max != max {
            verdict = Some(Err(LockError::PermitsMismatch {
                name: name.to_owned(),
                max,
                held_max: their_max,
            }));
            break;
        }
        if holder.key() == key.as_slice() {
            let fits = before + u64::from(permits) <= u64::from(max);
            verdict = Some(Ok(fits));
            break;
        }
        before += u64::from(their_permits);
    }
    if let Some(Ok(true)) = verdict {
        let lease = Lease::new(name, token, 0, valid_until(started, ttl))
            .with_kind(Kind::Semaphore { permits, max });
        return Ok(Attempt::Acquired(lease));
    }
    // Busy or refused: take the key back now (its etcd lease would end it too).
    let mut kv = client.kv_client();
    let _ = tokio::time::timeout(
        exec.command_timeout(),
        kv.delete(key, None::<DeleteOptions>),
    )
    .await;
    exec.revoke_etcd_lease_later(&client, etcd_lease);
    if let Some(Err(err)) = verdict {
        return Err(err);
    }
    let oldest = holders.iter().find(|h| parse(h.value()).is_some());
    Ok(exec.busy(&client, oldest, true).await)
}

/// The permits held now of `name`.
pub(crate) async fn in_use(exec: &Executor, name: &str) -> Result<u32, LockError> {
    let client = exec.client().await?;
    let answer = exec
        .txn(
            &client,
            Op::Acquire,
            Txn::new().and_then([read_all(exec.prefix(), name)]),
        )
        .await?;
    let Some(TxnOpResponse::Get(get)) = answer.op_responses().into_iter().next() else {
        return Ok(0);
    };
    let held: u64 = get
        .kvs()
        .iter()
        .filter_map(|kv| parse(kv.value()))
        .map(|(permits, _)| u64::from(permits))
        .sum();
    Ok(u32::try_from(held).unwrap_or(u32::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::name_of;

    #[test]
    fn keys_of_two_names_never_share_a_range() {
        let token = Token::from_bytes([1; 16]);
        let a = holder_key("p/", "a", &token);
        let ab = holder_key("p/", "a/b", &token);
        assert!(a.starts_with(&holders("p/", "a")));
        assert!(!ab.starts_with(&holders("p/", "a")));
        assert_eq!(name_of(b"p/", &ab), Some(&b"a/b"[..]));
        assert_eq!(name_of(b"p/", b"p/plain-lock"), None);
    }

    #[test]
    fn values_say_permits_and_max() {
        let token = Token::from_bytes([2; 16]);
        assert_eq!(parse(&holder_value(&token, 2, 5)), Some((2, 5)));
        assert_eq!(parse(b"dl:abc"), None);
    }
}
