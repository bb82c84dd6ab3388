//! `distlock release` on etcd: one transaction that deletes the key only if it still holds
//! the given token, never a bare delete.

use etcd_client::{Compare, CompareOp, Txn, TxnOp};

use super::{EtcdTarget, bounded};
use crate::exit::Failure;

/// Releases `name` if it still holds `token`: one transaction (delete the key if its value is
/// the token); `Ok(false)` when it holds another token or nothing.
///
/// The holder's etcd lease is left alone: revoking it would also drop any other key attached
/// to it, and without the key the holder's next keep-alive check finds the lock gone (lost).
/// Waiters watch the key's deletion, so they are woken by the delete itself.
pub(crate) async fn release_token(
    target: &EtcdTarget,
    name: &str,
    token: &str,
) -> Result<bool, Failure> {
    let key = target.key(name);
    let txn = Txn::new()
        .when([Compare::value(key.as_str(), CompareOp::Equal, token)])
        .and_then([TxnOp::delete(key.as_str(), None)]);
    let mut kv = target.client.kv_client();
    let response = bounded(
        &format!("releasing {key:?}"),
        target.command_timeout,
        kv.txn(txn),
    )
    .await?;
    Ok(response.succeeded())
}
