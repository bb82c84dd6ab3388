//! The self-probe: before its first grant, a lock checks that the store really honours
//! conditional writes, on an object of its own under the prefix. Some S3 look-alikes accept
//! `If-None-Match` and `If-Match` and ignore them; on such a store two contenders would both
//! "win" every race, so the lock refuses it instead of ever granting.

use lock_core::{LockError, Op};
use object_store::path::Path;
use object_store::{ObjectStoreExt as _, PutMode, PutOptions, UpdateVersion};

use crate::error::{BACKEND, timed};
use crate::store::Objects;

/// What the probe found wrong: the check that the store failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ignored {
    /// A create (`If-None-Match: *`) over an existing object succeeded.
    Create,
    /// An update on a version that was no longer current (`If-Match`) succeeded.
    Update,
    /// The store said it cannot write conditionally at all.
    NotImplemented,
}

/// Runs the probe: `Ok(None)` when the store refused both stale writes, `Ok(Some(check))`
/// when it accepted one (or cannot make them), an error when the store failed.
pub(crate) async fn probe(objects: &Objects) -> Result<Option<Ignored>, LockError> {
    let token = lock_core::Token::generate()?;
    let key = objects
        .prefix
        .clone()
        .join(format!(".distlock-probe-{token}"));
    let answer = checks(objects, &key).await;
    // The probe object is removed whatever the checks found (best effort: a failed delete
    // leaves one small object, which the next probe does not reuse).
    if let Ok(Err(e)) = timed(objects.timeout, objects.store.delete(&key)).await {
        tracing::debug!(backend = BACKEND, key = %key, error = %e, "probe object not removed");
    }
    answer
}

/// The two writes that must fail, between the writes that must succeed.
async fn checks(objects: &Objects, key: &Path) -> Result<Option<Ignored>, LockError> {
    // A conflict on a fresh name, or on the current version, is as wrong as accepting a
    // stale write: such a store cannot be trusted either.
    let Ok(Some(first)) = put(objects, key, b"1", PutMode::Create).await? else {
        return Ok(Some(Ignored::NotImplemented));
    };
    match put(objects, key, b"2", PutMode::Create).await? {
        Ok(Some(_)) => return Ok(Some(Ignored::Create)),
        Ok(None) => return Ok(Some(Ignored::NotImplemented)),
        Err(Conflict) => {}
    }
    // A fresh version, so that `first` is stale.
    let Ok(Some(_second)) = put(objects, key, b"3", PutMode::Update(first.clone())).await? else {
        return Ok(Some(Ignored::NotImplemented));
    };
    match put(objects, key, b"4", PutMode::Update(first)).await? {
        Ok(Some(_)) => Ok(Some(Ignored::Update)),
        Ok(None) => Ok(Some(Ignored::NotImplemented)),
        Err(Conflict) => Ok(None),
    }
}

/// A refused conditional write (`AlreadyExists`, `Precondition`).
#[derive(Debug)]
struct Conflict;

/// One probe write: `Ok(Some(version))` when taken, `Ok(None)` when the store cannot write
/// conditionally, `Err(Conflict)` when the condition failed; store errors are outer.
async fn put(
    objects: &Objects,
    key: &Path,
    bytes: &'static [u8],
    mode: PutMode,
) -> Result<Result<Option<UpdateVersion>, Conflict>, LockError> {
    let put = objects
        .store
        .put_opts(key, bytes.into(), PutOptions::from(mode));
    match timed(objects.timeout, put).await? {
        Ok(done) => Ok(Ok(Some(UpdateVersion::from(done)))),
        Err(
            object_store::Error::AlreadyExists { .. } | object_store::Error::Precondition { .. },
        ) => Ok(Err(Conflict)),
        Err(
            object_store::Error::NotImplemented { .. } | object_store::Error::NotSupported { .. },
        ) => Ok(Ok(None)),
        Err(e) => Err(objects.error(Op::Acquire, key, e)),
    }
}
