//! Reading and releasing lock objects from outside a lock's own grants: lock-core's
//! [`Inspect`] (what `distlock ls`, `show`, `release --token` need), and the raw object
//! ([`ObjectStoreLock::object`]).

use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use lock_core::backend::{
    HeldKind, HeldLock, HolderView, Inspect, ListOptions, Listing, NamePattern,
};
use lock_core::{LockError, Op};
use object_store::path::Path;

use crate::ObjectStoreLock;
use crate::store::Written;

/// One lock object as a tool reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LockObject {
    /// The lock's name.
    pub name: String,
    /// The object's path in the store.
    pub key: String,
    /// The fencing epoch of the last grant.
    pub epoch: u64,
    /// The holder's token (32 hex digits), `None` when released.
    pub holder: Option<String>,
    /// The lease the holder declared (how long a contender must see the object unchanged).
    pub lease: Duration,
    /// The holder's note, if it wrote one.
    pub note: Option<Vec<u8>>,
    /// When the holder was granted the lock (its own wall clock), if it said.
    pub since: Option<SystemTime>,
}

impl ObjectStoreLock {
    /// The lock object of `name`, held or released (its epoch is kept), `None` when there is
    /// none. [`Inspect::inspect`] gives the same as a held lock.
    ///
    /// # Errors
    /// [`LockError::WrongType`] when the object is not a lock body; timeouts and store errors.
    ///
    /// # Cancel safety
    /// Cancel safe: it changes nothing.
    pub async fn object(&self, name: &str) -> Result<Option<LockObject>, LockError> {
        let key = self.shared().objects.key(name);
        let current = self.shared().objects.read(Op::Read, &key).await?;
        Ok(current.map(|cur| LockObject {
            name: name.to_owned(),
            key: key.to_string(),
            epoch: cur.body.epoch,
            note: cur.body.note_bytes(),
            lease: cur.body.lease(),
            since: cur.body.since(),
            holder: cur.body.holder,
        }))
    }

    /// The names of every object directly under the prefix (lock objects and any other),
    /// sorted; the self-probe's objects left out.
    ///
    /// # Errors
    /// Timeouts and store errors.
    async fn names(&self) -> Result<Vec<String>, LockError> {
        let objects = &self.shared().objects;
        let listed = crate::error::timed(
            objects.timeout,
            objects.store.list_with_delimiter(Some(&objects.prefix)),
        )
        .await?
        .map_err(|e| objects.error(Op::Read, &objects.prefix, e))?;
        let mut names: Vec<String> = listed
            .objects
            .iter()
            .filter_map(|meta| meta.location.filename().map(decode))
            .filter(|name| !name.starts_with(".distlock-probe-"))
            .collect();
        names.sort();
        Ok(names)
    }

    /// Releases `name` if its holder's token is `token` (hex), as the holder's own release
    /// would (the object rewritten without a holder, its epoch kept); `false` when another
    /// token holds it, or nobody does (nothing changed).
    ///
    /// # Errors
    /// [`LockError::WrongType`] when the object is not a lock body; timeouts and store errors.
    async fn release_object(&self, name: &str, token: &str) -> Result<bool, LockError> {
        let objects = &self.shared().objects;
        let key: Path = objects.key(name);
        for _ in 0..2 {
            let Some(cur) = objects.read(Op::Release, &key).await? else {
                return Ok(false);
            };
            if !cur.body.held_by(token) {
                return Ok(false);
            }
            let released = cur.body.released();
            match objects
                .write(Op::Release, &key, &released, Some(&cur.version))
                .await?
            {
                Written::Done(_) => return Ok(true),
                Written::Lost => continue,
            }
        }
        Ok(false)
    }
}

/// A held lock object as an inspection shows it (`None` when released). The lease is the
/// most the holder has left: only a contender's own observation can tell less, and this read
/// is the first. The object's last write is the grant or a renewal, so it tells no "since".
fn held(object: LockObject, node: &str) -> Option<HeldLock> {
    let token = object.holder?;
    let mut holder = HolderView::new(token)
        .fencing_token(object.epoch)
        .ttl(object.lease);
    if let Some(note) = object.note {
        holder = holder.note(note);
    }
    if let Some(since) = object.since {
        holder = holder.since(since);
    }
    let mut lock = HeldLock::new(object.name, object.key, HeldKind::Mutex, node).holder(holder);
    lock.last_fencing_token = Some(object.epoch);
    Some(lock)
}

#[async_trait]
impl Inspect for ObjectStoreLock {
    async fn list(
        &self,
        pattern: &NamePattern,
        _options: &ListOptions,
    ) -> Result<Listing, LockError> {
        let names = self.names().await?;
        let scanned = names.len() as u64;
        let node = self.shared().objects.label.to_string();
        let mut locks = Vec::new();
        for name in names.iter().filter(|n| pattern.matches(n)) {
            // Another program's object under the prefix is not a lock: left out.
            if let Ok(Some(object)) = self.object(name).await {
                locks.extend(held(object, &node));
            }
        }
        Ok(Listing::new(locks, scanned))
    }

    async fn read(&self, name: &str) -> Result<Vec<HeldLock>, LockError> {
        let node = self.shared().objects.label.to_string();
        let object = self.object(name).await?;
        Ok(object.and_then(|o| held(o, &node)).into_iter().collect())
    }

    async fn release_held(&self, name: &str, token: &str) -> Result<bool, LockError> {
        self.release_object(name, token).await
    }
}

/// A path segment as `object_store` encoded it, decoded (`%2F` → `/`).
fn decode(segment: &str) -> String {
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use lock_core::Token;
    use lock_core::backend::{Attempt, Lock};
    use object_store::memory::InMemory;

    use super::*;

    #[test]
    fn names_are_decoded() {
        assert_eq!(decode("a%2Fb%25c"), "a/b%c");
        assert_eq!(decode("plain:name"), "plain:name");
    }

    #[tokio::test]
    async fn a_tool_reads_lists_and_releases_by_token() {
        let lock = ObjectStoreLock::new(Arc::new(InMemory::new()), "locks", Duration::from_secs(1));
        let token = Token::generate().expect("rng");
        let Ok(Attempt::Acquired(lease)) =
            lock.try_acquire("a/b", token, Duration::from_secs(5)).await
        else {
            panic!("free");
        };
        assert_eq!(lock.names().await.expect("list"), vec!["a/b".to_owned()]);
        let seen = lock.object("a/b").await.expect("read").expect("there");
        assert!(seen.since.is_some(), "the grant says when it was made");
        assert_eq!(seen.holder.as_deref(), Some(token.to_hex().as_str()));
        assert_eq!(seen.epoch, lease.fencing_token());
        assert!(!lock.release_token("a/b", "00").await.expect("answers"));
        assert!(
            lock.release_token("a/b", token.to_hex().as_str())
                .await
                .expect("answers")
        );
        assert_eq!(
            lock.object("a/b")
                .await
                .expect("read")
                .expect("kept")
                .holder,
            None
        );
        assert!(
            !lock.release(&lease).await.expect("answers"),
            "released by the tool"
        );
    }
}
