//! `distlock release` on etcd: one transaction that deletes the key only if it still holds
//! the given token, never a bare delete.

use std::process::ExitCode;

use etcd_client::{Compare, CompareOp, Txn, TxnOp, TxnOpResponse};

use super::read::describe;
use super::{EtcdTarget, bounded};
use crate::cli::ReleaseArgs;
use crate::exit::{FAILURE, Failure};
use crate::release::{confirm, explain_not_released, refuse_without_terminal};

/// Releases `args.name` if it is held with the given token (or, with `--force`, with the token
/// it has now, after the operator confirms on a terminal).
///
/// The holder's etcd lease is left alone: revoking it would also drop any other key attached
/// to it, and without the key the holder's next keep-alive check finds the lock gone (lost).
/// Waiters watch the key's deletion, so they are woken by the delete itself.
pub(crate) async fn release(
    target: &EtcdTarget,
    args: &ReleaseArgs,
    json: bool,
) -> Result<ExitCode, Failure> {
    let token = match &args.token {
        Some(token) => token.clone(),
        None => {
            refuse_without_terminal()?;
            let Some(token) = holder_token(target, &args.name).await? else {
                return Err(Failure::new(
                    FAILURE,
                    format!("{:?} is not held", args.name),
                ));
            };
            confirm(&args.name, token)?
        }
    };
    let key = target.key(&args.name);
    let txn = Txn::new()
        .when([Compare::value(
            key.as_str(),
            CompareOp::Equal,
            token.as_str(),
        )])
        .and_then([TxnOp::delete(key.as_str(), None)])
        .or_else([TxnOp::get(key.as_str(), None)]);
    let mut kv = target.client.kv_client();
    let response = bounded(
        &format!("releasing {key:?}"),
        target.command_timeout,
        kv.txn(txn),
    )
    .await?;
    let released = response.succeeded();
    if json {
        println!(
            "{}",
            serde_json::json!({ "name": args.name, "token": token, "released": released })
        );
    } else if released {
        println!("released {:?} (token {token}); waiters notified", args.name);
    }
    if released {
        return Ok(ExitCode::SUCCESS);
    }
    if !json {
        // The transaction's else branch read the key in the same step.
        let now = response.op_responses().into_iter().find_map(|op| match op {
            TxnOpResponse::Get(get) => get
                .kvs()
                .first()
                .and_then(|kv| kv.value_str().ok().map(str::to_owned)),
            _ => None,
        });
        explain_not_released(&args.name, now.as_deref());
    }
    Ok(ExitCode::from(FAILURE))
}

/// The token of whoever holds `name` now, if anyone.
async fn holder_token(target: &EtcdTarget, name: &str) -> Result<Option<String>, Failure> {
    Ok(describe(target, name)
        .await?
        .into_iter()
        .find_map(|lock| lock.token))
}
