//! The versions of this lock's own writes, so that a renewal is one conditional write (one
//! request, which is what an object store bills) instead of a read and a write.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use lock_core::Token;
use object_store::UpdateVersion;
use object_store::path::Path;

use crate::body::Body;

/// The last write this lock made to each object it holds, and to each it released.
#[derive(Debug, Default)]
pub(crate) struct Held {
    writes: Mutex<HashMap<String, (Token, UpdateVersion, Body)>>,
    /// Objects this lock released, at the version of its release: the next grant here is
    /// tried as one conditional write on that version, without a read (if anyone wrote since,
    /// the condition fails and the grant reads first).
    released: Mutex<HashMap<String, (UpdateVersion, Body)>>,
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

    /// Records that this lock released `key`, writing `body` as `version`.
    pub(crate) fn put_released(&self, key: &Path, version: UpdateVersion, body: Body) {
        let mut released = self.released.lock().unwrap_or_else(PoisonError::into_inner);
        // Bounded like the observations: a process that touches many names keeps the last ones.
        if released.len() >= 1024 {
            released.clear();
        }
        released.insert(key.to_string(), (version, body));
    }

    /// Takes the release this lock made of `key`, if it made one.
    pub(crate) fn take_released(&self, key: &Path) -> Option<(UpdateVersion, Body)> {
        self.released
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(key.as_ref())
    }

    /// Forgets `key`'s write by `token` (released, or found no longer ours).
    pub(crate) fn forget(&self, key: &Path, token: &Token) {
        let mut writes = self.writes.lock().unwrap_or_else(PoisonError::into_inner);
        if writes.get(key.as_ref()).is_some_and(|(t, ..)| t == token) {
            writes.remove(key.as_ref());
        }
    }
}
