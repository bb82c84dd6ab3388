//! The multi-lock: several mutexes at once, all or none, in one script (`lua/multi_acquire.lua`)
//! when every key is on one server (not a cluster) or in one cluster slot. Each name is then
//! an ordinary mutex lease: extended, released and announced as one.

use std::sync::Arc;
use std::time::Duration;

use lock_core::backend::MultiAttempt;
use lock_core::{Lease, LockError, Op, Token, valid_until};
use tokio::time::Instant;

use super::{Grants, gave_back, mutex, unexpected};
use crate::connection::conn::Conn;
use crate::executor::Executor;
use crate::layout::slot::key_slot;
use crate::layout::{Keys, token_value};
use crate::scripts::MULTI_ACQUIRE;
use crate::topology::Topology;

/// One attempt at the mutexes `names` (at `keys`, in the same order) for `ttl_ms` in one
/// script; `None` when their keys lie in several slots of a cluster, where no script reaches
/// them all: the caller then takes them one after the other.
pub(crate) async fn try_in_one_script(
    exec: &Executor,
    grants: &Grants,
    keys: &[Keys],
    names: &[Arc<str>],
    token: Token,
    ttl_ms: u64,
) -> Result<Option<MultiAttempt>, LockError> {
    let one_slot = keys
        .windows(2)
        .all(|w| key_slot(w[0].key()) == key_slot(w[1].key()));
    if !one_slot && exec.topology() == Topology::Cluster {
        return Ok(None);
    }
    let started = Instant::now();
    let value = token_value(&token);
    let all_keys = script_keys(grants, keys);
    let [ttl_arg, retention, count] = script_args(grants, keys, ttl_ms);
    let key_refs: Vec<&str> = all_keys.iter().map(String::as_str).collect();
    let (reply, mut conn): (Vec<redis::Value>, Conn) = exec
        .run(
            Op::Acquire,
            &MULTI_ACQUIRE,
            &key_refs,
            &[value.as_str(), &ttl_arg, &retention, &count],
        )
        .await?;
    match integers(&reply)[..] {
        [1, ref fences @ ..] if fences.len() == names.len() => {
            let valid = valid_until(started, Duration::from_millis(ttl_ms));
            let leases: Vec<Lease> = names
                .iter()
                .zip(fences)
                .map(|(name, fence)| {
                    Lease::new(
                        Arc::clone(name),
                        token,
                        u64::try_from(*fence).unwrap_or(0),
                        valid,
                    )
                })
                .collect();
            // Replicas confirm the writes of the one script (one WAIT for all of them); a
            // grant they do not confirm is given back.
            if let Err(error) = exec.confirm(&mut conn, keys[0].key(), Op::Acquire).await {
                for (lease, keys) in leases.iter().zip(keys) {
                    gave_back(Box::pin(mutex::release(exec, grants, keys, lease)).await);
                }
                return Err(error);
            }
            Ok(Some(MultiAttempt::Acquired(leases)))
        }
        [0, index, busy_ms, announces] => {
            let index = usize::try_from(index).unwrap_or(0);
            let holder_ttl = u64::try_from(busy_ms).ok().map(Duration::from_millis);
            if announces == 1
                && let (Some(keys), Some(holder_ttl), Some(redis::Value::BulkString(holder))) =
                    (keys.get(index), holder_ttl, reply.get(4))
            {
                exec.mark_waiting(keys, holder_ttl, holder).await;
            }
            Ok(Some(MultiAttempt::Busy {
                index,
                holder_ttl,
                announces: announces == 1,
            }))
        }
        _ => Err(unexpected(format!(
            "unexpected multi acquire reply {reply:?}"
        ))),
    }
}

/// The script's keys: every lock key, then, with fencing, every fencing counter.
fn script_keys(grants: &Grants, keys: &[Keys]) -> Vec<String> {
    let mut all_keys: Vec<String> = keys.iter().map(|k| k.key().to_owned()).collect();
    if grants.fencing {
        all_keys.extend(keys.iter().map(Keys::fence));
    }
    all_keys
}

/// The script's arguments after the token: the TTL, the counters' retention (empty without
/// fencing) and how many locks there are.
fn script_args(grants: &Grants, keys: &[Keys], ttl_ms: u64) -> [String; 3] {
    let retention = if grants.fencing {
        grants.fence_retention_ms.to_string()
    } else {
        String::new()
    };
    [ttl_ms.to_string(), retention, keys.len().to_string()]
}

/// The leading integers of the script's reply (on a busy answer the holder's token follows).
fn integers(reply: &[redis::Value]) -> Vec<i64> {
    reply
        .iter()
        .map_while(|value| match value {
            redis::Value::Int(n) => Some(*n),
            _ => None,
        })
        .collect()
}
