//! Holder descriptions for observers ([`Lock::describe_holder`], [`Lock::annotate`]): a note
//! beside a mutex (or fair) grant, in its own key (`{key}:distlock-note`, see `layout.rs`),
//! holding the grant's token, its fencing token and the note — the one holder description,
//! which a grant with holder metadata writes too (`holder.rs`). The lock key keeps the plain
//! token (the layout redis-py and node-redlock share), so the fencing token an observer needs
//! travels in the note, or, before the holder wrote one, comes from the fencing counter.
//!
//! [`Lock::describe_holder`]: lock_core::backend::Lock::describe_holder
//! [`Lock::annotate`]: lock_core::backend::Lock::annotate

use lock_core::backend::Holder;
use lock_core::{Kind, Lease, LockError, Op};

use super::{Grants, unexpected};
use crate::executor::Executor;
use crate::holder::HolderReplies;
use crate::layout::{Keys, token_value};
use crate::scripts::{ANNOTATE, DESCRIBE_HOLDER};

pub use lock_core::MAX_NOTE_BYTES;

/// Writes `note` beside the mutex (or fair) `lease` while its token holds the key: one
/// EVALSHA of `lua/annotate.lua`. `Ok(false)` when the lease is no longer ours, or is of
/// another kind (its key is not the mutex's).
pub(crate) async fn annotate(
    exec: &Executor,
    grants: &Grants,
    keys: &Keys,
    lease: &Lease,
    note: &[u8],
) -> Result<bool, LockError> {
    lock_core::check_note(note)?;
    if !matches!(lease.kind(), Kind::Mutex | Kind::Fair { .. }) {
        return Ok(false);
    }
    let token = token_value(lease.token());
    let fence = lease.fencing_token().to_string();
    // The note lives as long as the fencing counter, not the lease: renewals need not touch it
    // (see `lua/annotate.lua`); at least a millisecond, which PX needs.
    let retention = grants.fence_retention_ms().max(1).to_string();
    let note_key = keys.note();
    let (written, _conn): (i64, _) = exec
        .run(
            Op::Extend,
            &ANNOTATE,
            &[keys.key(), &note_key],
            &[
                token.as_str().as_bytes(),
                fence.as_bytes(),
                note,
                retention.as_bytes(),
            ],
        )
        .await?;
    Ok(written == 1)
}

/// The holder of the mutex at `keys`, in one atomic read (`lua/describe_holder.lua`) decoded by
/// the one reader of holder descriptions ([`HolderReplies`]): `None` when the key is absent.
pub(crate) async fn describe(exec: &Executor, keys: &Keys) -> Result<Option<Holder>, LockError> {
    let (note_key, fence_key) = (keys.note(), keys.fence());
    let (reply, _conn): (Option<Vec<redis::Value>>, _) = exec
        .run(
            Op::Acquire,
            &DESCRIBE_HOLDER,
            &[keys.key(), &note_key, &fence_key],
            &[] as &[&str],
        )
        .await?;
    let Some(reply) = reply else {
        return Ok(None);
    };
    let bad = || unexpected(format!("unexpected describe_holder reply {reply:?}"));
    let bytes = |value: &redis::Value| match value {
        redis::Value::Nil => Ok(None),
        redis::Value::BulkString(b) => Ok(Some(b.clone())),
        _ => Err(bad()),
    };
    let [value, pttl, note, fence] = &reply[..] else {
        return Err(bad());
    };
    let (value, note, fence) = (bytes(value)?, bytes(note)?, bytes(fence)?);
    let pttl_ms: i64 = redis::from_redis_value_ref(pttl).map_err(|_| bad())?;
    Ok(HolderReplies {
        value: value.as_deref(),
        pttl_ms,
        note: note.as_deref(),
        fence: fence.as_deref(),
    }
    .holder())
}
