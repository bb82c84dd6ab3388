//! Guarded writes, the fence every distlock store keeps ([`Fence`]): the user's etcd operations
//! applied only if the fence's token is ≥ the largest token its resource has accepted, and the
//! record raised to it, in one transaction (Kleppmann, "How to do distributed locking", 2016:
//! the store, not the lock, refuses the paused holder).
//!
//! The record of a resource is the key `prefix + "\0acc/" + len + ":" + resource + "/"`, its
//! value the token as 20 zero-padded decimal digits, so that etcd's byte-wise value compare
//! orders tokens as numbers. etcd fails every value compare on a key that does not exist, so
//! the transaction nests a second one for a resource never fenced:
//!
//! ```text
//! if value(record) < pad(token + 1)       // a record, and it is ≤ token
//! then put(record, pad(token)), ops...
//! else txn(if version(record) = 0        // no record yet
//!          then put(record, pad(token)), ops...
//!          else get(record))              // refused: the record says by whom
//! ```
//!
//! One round trip, one revision: the compare, the raise and the writes commit together or not
//! at all.

use etcd_client::{Compare, CompareOp, Txn, TxnOp, TxnOpResponse, TxnResponse};
use lock_core::{Fence, LockError};

use crate::layout::{ACCEPTED, under};

/// The record's value for `token`: 20 digits, zero-padded (`u64::MAX` has 20).
fn padded(token: u64) -> String {
    format!("{token:020}")
}

/// The key of `resource`'s fence record under `prefix`.
pub(crate) fn record_key(prefix: &str, resource: &str) -> Vec<u8> {
    under(ACCEPTED, prefix, resource)
}

/// The guarded transaction of `ops` with `fence`, under `prefix` (see the module docs).
///
/// # Errors
/// [`LockError::InvalidInput`] for an empty resource name or one over lock-core's name limit
/// (`MAX_NAME_LEN`).
pub(crate) fn txn(prefix: &str, fence: &Fence, ops: Vec<TxnOp>) -> Result<Txn, LockError> {
    if fence.resource.is_empty() {
        return Err(LockError::invalid("the fenced resource's name is empty"));
    }
    if fence.resource.len() > lock_core::MAX_NAME_LEN {
        return Err(LockError::invalid(format!(
            "the fenced resource's name is {} bytes, over the {} a lock name may have",
            fence.resource.len(),
            lock_core::MAX_NAME_LEN
        )));
    }
    let key = record_key(prefix, &fence.resource);
    let mut admitted = Vec::with_capacity(ops.len() + 1);
    admitted.push(TxnOp::put(key.clone(), padded(fence.token), None));
    admitted.extend(ops);
    let first = Txn::new()
        .when([Compare::version(key.clone(), CompareOp::Equal, 0)])
        .and_then(admitted.clone())
        .or_else([TxnOp::get(key.clone(), None)]);
    // A record ≤ token is one < token + 1; at u64::MAX every record is.
    let at_most = match fence.token.checked_add(1) {
        Some(next) => Compare::value(key, CompareOp::Less, padded(next)),
        None => Compare::version(key, CompareOp::Greater, 0),
    };
    Ok(Txn::new()
        .when([at_most])
        .and_then(admitted)
        .or_else([TxnOp::txn(first)]))
}

/// What etcd's answer to [`txn`] means: the answers of the user's operations, in order, when
/// the fence admitted them; [`LockError::Fenced`] (naming the record) when it refused.
pub(crate) fn outcome(
    fence: &Fence,
    answer: &TxnResponse,
) -> Result<Vec<TxnOpResponse>, LockError> {
    if answer.succeeded() {
        return Ok(answer.op_responses().into_iter().skip(1).collect());
    }
    let inner = answer.op_responses().into_iter().next();
    let Some(TxnOpResponse::Txn(inner)) = inner else {
        return Err(unexpected(answer));
    };
    if inner.succeeded() {
        return Ok(inner.op_responses().into_iter().skip(1).collect());
    }
    let recorded = match inner.op_responses().into_iter().next() {
        Some(TxnOpResponse::Get(got)) => got.kvs().first().and_then(|kv| {
            std::str::from_utf8(kv.value())
                .ok()
                .and_then(|v| v.parse::<u64>().ok())
        }),
        _ => None,
    };
    Err(LockError::Fenced {
        resource: fence.resource.clone(),
        token: fence.token,
        current: recorded.unwrap_or(fence.token.saturating_add(1)),
    })
}

/// An answer of a shape the transaction cannot produce.
fn unexpected(answer: &TxnResponse) -> LockError {
    LockError::Backend {
        backend: crate::error::BACKEND,
        op: lock_core::Op::Write,
        retryable: false,
        source: format!("unexpected answer to a guarded transaction: {answer:?}").into(),
    }
}

#[cfg(test)]
mod tests {
    use super::{Fence, padded, record_key, txn};

    #[test]
    fn padded_tokens_order_as_numbers() {
        let tokens = [0, 9, 10, 99, 1_000_000, u64::MAX - 1, u64::MAX];
        for pair in tokens.windows(2) {
            assert!(padded(pair[0]) < padded(pair[1]), "{pair:?}");
        }
        assert_eq!(padded(u64::MAX).len(), 20);
    }

    #[test]
    fn records_of_two_resources_never_share_a_key() {
        assert_ne!(record_key("", "a"), record_key("", "a/"));
        assert!(record_key("p/", "x").starts_with(b"p/\0acc/"));
    }

    #[test]
    fn bad_resources_are_refused_before_sending() {
        assert!(txn("", &Fence::new("", 1), Vec::new()).is_err());
        let long = "x".repeat(lock_core::MAX_NAME_LEN + 1);
        assert!(txn("", &Fence::new(long, 1), Vec::new()).is_err());
        assert!(txn("", &Fence::new("r", u64::MAX), Vec::new()).is_ok());
    }
}
