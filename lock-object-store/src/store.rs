//! The two requests every operation is made of: read a lock object, write it conditionally.

use std::sync::Arc;
use std::time::Duration;

use lock_core::backend::Detached;
use lock_core::{LockError, Op};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt as _, PutMode, PutOptions, UpdateVersion};
use tokio::time::Instant;

use crate::body::Body;
use crate::error::{timed, to_lock_error};

/// A lock object as one read found it.
#[derive(Debug, Clone)]
pub(crate) struct Current {
    pub(crate) body: Body,
    pub(crate) version: UpdateVersion,
    /// When the read's answer arrived (the contender's observations start here).
    pub(crate) received: Instant,
}

/// What a conditional write came to.
#[derive(Debug)]
pub(crate) enum Written {
    /// The store took it: the object's new version.
    Done(UpdateVersion),
    /// The condition failed: another write came first (or the object exists, for a create).
    Lost,
}

/// The store, the prefix and the per-request timeout.
#[derive(Debug, Clone)]
pub(crate) struct Objects {
    pub(crate) store: Arc<dyn ObjectStore>,
    pub(crate) prefix: Path,
    pub(crate) timeout: Duration,
    /// The store as it prints itself (`AmazonS3(bucket)`), for errors.
    pub(crate) label: Arc<str>,
}

impl Objects {
    /// The object of lock `name`: `{prefix}/{name}`, the name one path segment (a `/` in it is
    /// percent-encoded by `object_store`, so two names never share an object).
    pub(crate) fn key(&self, name: &str) -> Path {
        self.prefix.clone().join(name)
    }

    /// Reads `key`: `None` when there is no object.
    ///
    /// # Errors
    /// [`LockError::WrongType`] when the object is not a lock body; timeouts and store errors.
    pub(crate) async fn read(&self, op: Op, key: &Path) -> Result<Option<Current>, LockError> {
        let got = match timed(self.timeout, self.store.get(key)).await? {
            Ok(got) => got,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(self.error(op, key, e)),
        };
        let version = UpdateVersion {
            e_tag: got.meta.e_tag.clone(),
            version: got.meta.version.clone(),
        };
        let bytes = match timed(self.timeout, got.bytes()).await? {
            Ok(bytes) => bytes,
            Err(e) => return Err(self.error(op, key, e)),
        };
        let received = Instant::now();
        let body = Body::decode(&bytes).map_err(|e| LockError::WrongType {
            key: key.to_string(),
            detail: e.0,
        })?;
        Ok(Some(Current {
            body,
            version,
            received,
        }))
    }

    /// Writes `body` at `key` if the object is absent (`on: None`) or still at version `on`.
    ///
    /// # Errors
    /// Timeouts and store errors (after a timeout the write may have landed).
    pub(crate) async fn write(
        &self,
        op: Op,
        key: &Path,
        body: &Body,
        on: Option<&UpdateVersion>,
    ) -> Result<Written, LockError> {
        let mode = on.map_or(PutMode::Create, |v| PutMode::Update(v.clone()));
        let put = self
            .store
            .put_opts(key, body.encode().into(), PutOptions::from(mode));
        self.written(op, key, timed(self.timeout, put).await?)
    }

    /// The grant's conditional write of `body` at `key` (as [`Objects::write`]), seen through
    /// even when its caller goes: cancelled, or its request bound ran out after the request
    /// left. A write that lands for a caller who is gone is given back at once, by a
    /// conditional write of the released body on the version it made (safety rule 12: what a
    /// request may leave behind is undone after it answered, never before). The `Locker`'s
    /// armed release of the token covers a write that landed before that release read the
    /// object; this covers one the store applies after.
    ///
    /// # Errors
    /// As [`Objects::write`].
    pub(crate) async fn grant(
        &self,
        key: &Path,
        body: &Body,
        on: Option<&UpdateVersion>,
    ) -> Result<Written, LockError> {
        let mode = on.map_or(PutMode::Create, |v| PutMode::Update(v.clone()));
        let (store, path, bytes) = (Arc::clone(&self.store), key.clone(), body.encode());
        let give_back = (Arc::clone(&self.store), key.clone(), body.released());
        let timeout = self.timeout;
        let put = Detached::future(async move {
            store
                .put_opts(&path, bytes.into(), PutOptions::from(mode))
                .await
        })
        .leftover(move |landed| async move {
            let Ok(done) = landed else { return };
            let (store, path, released) = give_back;
            let on = PutMode::Update(UpdateVersion::from(done));
            let put = store.put_opts(&path, released.encode().into(), PutOptions::from(on));
            // A failure leaves the grant to its lease, as a crash would; a precondition
            // failure means the armed release got there first.
            if !matches!(tokio::time::timeout(timeout, put).await, Ok(Ok(_))) {
                tracing::debug!(key = %path, "a grant nobody received was not given back");
            }
        });
        self.written(Op::Acquire, key, timed(self.timeout, put).await?)
    }

    /// What a conditional write's answer means.
    fn written(
        &self,
        op: Op,
        key: &Path,
        answer: object_store::Result<object_store::PutResult>,
    ) -> Result<Written, LockError> {
        match answer {
            Ok(done) => Ok(Written::Done(UpdateVersion::from(done))),
            Err(
                object_store::Error::AlreadyExists { .. }
                | object_store::Error::Precondition { .. },
            ) => Ok(Written::Lost),
            Err(e) => Err(self.error(op, key, e)),
        }
    }

    /// A store error of `op` at `key` as a [`LockError`].
    pub(crate) fn error(&self, op: Op, key: &Path, e: object_store::Error) -> LockError {
        to_lock_error(op, &self.label, key.as_ref(), e, self.timeout)
    }
}
