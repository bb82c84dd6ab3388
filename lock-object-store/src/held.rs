//! The versions of this lock's own writes, so that a renewal is one conditional write (one
//! request, which is what an object store bills) instead of a read and a write.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use lock_core::Token;
use object_store::UpdateVersion;
use object_store::path::Path;

use crate::body::Body;

/// The last write this lock made to each object it holds.
#[derive(Debug, Default)]
pub(crate) struct Held {
    writes: Mutex<HashMap<String, (Token, UpdateVersion, Body)>>,
}

impl Held {
    /// Records that `token`'s write of `body` made `version` of `key`.
    pub(crate) fn put(&self, key: &Path, token: &Token, version: UpdateVersion, body: Body) {
        self.writes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key.to_string(), (*token, version, body));
    }

    /// The last write of `token` to `key`, if this lock made one.
    pub(crate) fn get(&self, key: &Path, token: &Token) -> Option<(UpdateVersion, Body)> {
        let writes = self.writes.lock().unwrap_or_else(PoisonError::into_inner);
        match writes.get(key.as_ref()) {
            Some((t, version, body)) if t == token => Some((version.clone(), body.clone())),
            _ => None,
        }
    }

    /// Forgets `key`'s write by `token` (released, or found no longer ours).
    pub(crate) fn forget(&self, key: &Path, token: &Token) {
        let mut writes = self.writes.lock().unwrap_or_else(PoisonError::into_inner);
        if writes.get(key.as_ref()).is_some_and(|(t, ..)| t == token) {
            writes.remove(key.as_ref());
        }
    }
}
