//! Held transactions: the user's own etcd writes, committed only while a guard's grant is
//! still the current one (the crate README, "Guarded writes").
//!
//! A grant is a key written at a revision, and that revision is the guard's fencing token. So
//! "this guard still holds the lock" is two compares on that key, evaluated by etcd in the same
//! transaction as the user's operations: its value is the grant's (`dl:` + token) and its
//! `mod_revision` is the fencing token. The transaction commits at one revision, so the
//! operations apply only if, at that revision, no other grant has replaced this one (a
//! successor's grant needs the key absent first, and a hand-over rewrites it at a new revision).
//!
//! Which revision equals the token, by kind (checked against `kinds/`):
//! - the mutex, the fair lock, the writer, each name of a multi-lock: the grant's transaction
//!   puts the lock key, so its `mod_revision` (and, before a hand-over, its `create_revision`)
//!   is the token. A hand-over puts the key again at a new revision, the new grant's token,
//!   while `create_revision` stays the first grant's: `mod_revision` is the one to compare. A
//!   mutex grant on a bucket lease that is extended by hand is moved to a lease of its own
//!   (`moving.rs`), which puts the key again with the same value at a later revision: so the
//!   compare is `mod_revision >= token`. That is as strong: the value is the grant's fresh
//!   128-bit token, which only this grant's own writes (the grant, the hand-over that made it,
//!   its move) put, all at or after its token's revision; a successor's grant replaces the
//!   value.
//! - a reader: its token is the `mod_revision` of the name's fence key (`\0rwf/…/`, put by every
//!   write grant; absent, revision 0, when the name was never write-locked). The reader holds
//!   its own key, so the compares are that key's value and the fence key's `mod_revision` (an
//!   absent key compares as revision 0 in etcd).
//! - semaphore permits have token 0 and no key of the name: no held transaction.

use etcd_client::{Compare, CompareOp, TxnOp, TxnResponse};
use lock_core::{Kind, Lease, LockError};

use crate::executor::read;
use crate::layout::{self, FENCE, reader_key, under};

/// What guards a transaction for one grant: the compares that hold while the grant is the
/// current one, and the key whose `mod_revision` is the grant's fencing token (read back on a
/// refusal to say which token replaced it).
pub(crate) struct Guarded {
    pub(crate) compares: Vec<Compare>,
    pub(crate) revision_key: Vec<u8>,
}

/// The compares of the grant `lease` under `prefix`; see the module docs.
///
/// # Errors
/// [`LockError::InvalidInput`] for a name etcd's layout refuses, a semaphore lease (no fencing
/// token), a lease of another kind without a fencing token (0: not an etcd grant), or a kind
/// this crate does not know.
pub(crate) fn guard_compares(prefix: &str, lease: &Lease) -> Result<Guarded, LockError> {
    layout::check_name(lease.name())?;
    let (name, token, fencing) = (lease.name(), lease.token(), lease.fencing_token());
    let revision = i64::try_from(fencing).map_err(|_| {
        LockError::invalid(format!("fencing token {fencing} is not an etcd revision"))
    })?;
    let holds = |key: Vec<u8>| Compare::value(key, CompareOp::Equal, layout::value(token));
    match lease.kind() {
        Kind::Mutex | Kind::Fair { .. } | Kind::Write { .. } => {
            if fencing == 0 {
                return Err(LockError::invalid(format!(
                    "the guard of {name:?} has fencing token 0: it is not an etcd grant, so no \
                     held transaction can name its revision"
                )));
            }
            let key = layout::key(prefix, name);
            Ok(Guarded {
                compares: vec![
                    holds(key.clone()),
                    Compare::mod_revision(
                        key.clone(),
                        CompareOp::Greater,
                        revision.saturating_sub(1),
                    ),
                ],
                revision_key: key,
            })
        }
        Kind::Read { .. } => {
            let fence = under(FENCE, prefix, name);
            Ok(Guarded {
                compares: vec![
                    holds(reader_key(prefix, name, token)),
                    Compare::mod_revision(fence.clone(), CompareOp::Equal, revision),
                ],
                revision_key: fence,
            })
        }
        Kind::Semaphore { .. } => Err(LockError::invalid(format!(
            "the guard of {name:?} holds semaphore permits, which carry no fencing token \
             (0): a held transaction needs a mutex, fair, read, write or multi-lock guard"
        ))),
        other => Err(LockError::invalid(format!(
            "a held transaction does not know the lock kind {}",
            other.label()
        ))),
    }
}

/// The read a held commit adds to its else branch: the key whose revision is the token.
pub(crate) fn read_back(guarded: &Guarded) -> TxnOp {
    TxnOp::get(guarded.revision_key.clone(), None)
}

/// The error of a held commit of `lease` that etcd refused, from `answer`'s else branch
/// ([`read_back`]): `current` is the revision key's `mod_revision` when it is above the token
/// (the successor's fencing token), else the store's revision at the refusal (no other grant
/// holds the name now; every later grant's token will be above it).
pub(crate) fn fenced(lease: &Lease, answer: &TxnResponse) -> LockError {
    let token = lease.fencing_token();
    let current = read(answer, 0)
        .and_then(|kv| u64::try_from(kv.mod_revision()).ok())
        .filter(|r| *r > token)
        .or_else(|| {
            answer
                .header()
                .and_then(|h| u64::try_from(h.revision()).ok())
        })
        .unwrap_or(0);
    LockError::Fenced {
        resource: lease.name().to_owned(),
        token,
        current,
    }
}
