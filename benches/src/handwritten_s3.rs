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
