//! The hand-written baseline on object storage: the minimal lock people write on a store that
//! writes conditionally, with the same client (`object_store`) as `ObjectStoreLock`.
//!
//! `PUT If-None-Match: *` of a random token to acquire (`PutMode::Create`), `DELETE` to
//! release. No expiry, no fencing, no renewal, no check that the object still holds the token
//! before deleting it: the floor a lock library on object storage has to beat.

use std::sync::Arc;

use lock_object_store::object_store::path::Path;
use lock_object_store::object_store::{
    self, ObjectStore, ObjectStoreExt as _, PutMode, PutOptions,
};

/// A minimal hand-written lock: one object per name under a prefix of `store`.
#[derive(Debug, Clone)]
pub struct HandS3Lock {
    store: Arc<dyn ObjectStore>,
    prefix: String,
}

impl HandS3Lock {
    /// The lock on `store`, its objects under `prefix`.
    #[must_use]
    pub fn new(store: Arc<dyn ObjectStore>, prefix: &str) -> Self {
        Self {
            store,
            prefix: prefix.to_owned(),
        }
    }

    fn path(&self, name: &str) -> Path {
        Path::from(format!("{}/{name}", self.prefix))
    }

    /// One attempt: `PUT If-None-Match: *` of a fresh token. `Some(token)` if we got it,
    /// `None` if the object exists (the lock is held).
    ///
    /// # Errors
    /// Store errors, and a failing OS random source.
    pub async fn try_acquire(&self, name: &str) -> Result<Option<String>, String> {
        let token = crate::handwritten::token().map_err(|e| e.to_string())?;
        let put = self
            .store
            .put_opts(
                &self.path(name),
                token.clone().into_bytes().into(),
                PutOptions::from(PutMode::Create),
            )
            .await;
        match put {
            Ok(_) => Ok(Some(token)),
            Err(object_store::Error::AlreadyExists { .. }) => Ok(None),
            Err(e) => Err(e.to_string()),
        }
    }

    /// Releases `name` (`DELETE`).
    ///
    /// # Errors
    /// Store errors.
    pub async fn release(&self, name: &str) -> Result<(), String> {
        self.store
            .delete(&self.path(name))
            .await
            .map_err(|e| e.to_string())
    }
}

/// The requests `ObjectStoreLock` sends in an uncontended cycle, and nothing else: a
/// conditional `PUT If-Match` on the version this client wrote last (the grant), then another
/// (the release), each of a small body; `PUT If-None-Match: *` the first time a name is used.
///
/// Not a lock anyone should use (it never reads, so it cannot see another holder's object):
/// the floor of a lock that keeps its object across releases, as a fencing epoch must be.
/// Measured beside [`HandS3Lock`], it splits distlock's cost into what the store charges for
/// an update instead of a delete and what the library adds.
#[derive(Debug, Clone)]
pub struct BareS3Updates {
    store: Arc<dyn ObjectStore>,
    prefix: String,
    /// The version of each name's last write by this client.
    versions: Arc<std::sync::Mutex<std::collections::HashMap<String, object_store::UpdateVersion>>>,
}

impl BareS3Updates {
    /// The baseline on `store`, its objects under `prefix`.
    #[must_use]
    pub fn new(store: Arc<dyn ObjectStore>, prefix: &str) -> Self {
        Self {
            store,
            prefix: prefix.to_owned(),
            versions: Arc::default(),
        }
    }

    /// One grant and one release of `name`: two conditional writes.
    ///
    /// # Errors
    /// Store errors, a failed precondition (another writer) among them.
    pub async fn cycle(&self, name: &str) -> Result<(), String> {
        self.write(name, b"{\"h\":\"held\"}").await?;
        self.write(name, b"{\"h\":null}").await
    }

    async fn write(&self, name: &str, body: &'static [u8]) -> Result<(), String> {
        let path = Path::from(format!("{}/{name}", self.prefix));
        let last = self
            .versions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(name)
            .cloned();
        let mode = last.map_or(PutMode::Create, PutMode::Update);
        let put = self
            .store
            .put_opts(&path, body.into(), PutOptions::from(mode))
            .await
            .map_err(|e| e.to_string())?;
        let version = object_store::UpdateVersion {
            e_tag: put.e_tag,
            version: put.version,
        };
        self.versions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(name.to_owned(), version);
        Ok(())
    }
}
