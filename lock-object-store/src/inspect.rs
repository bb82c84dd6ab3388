//! Reading and releasing lock objects from outside a lock's own grants: what an operator's
//! tool (`distlock ls`, `show`, `release --token`) needs.

use std::time::Duration;

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
}

impl ObjectStoreLock {
    /// The lock object of `name`, `None` when there is none.
    ///
    /// # Errors
    /// [`LockError::WrongType`] when the object is not a lock body; timeouts and store errors.
    ///
    /// # Cancel safety
    /// Cancel safe: it changes nothing.
    pub async fn inspect(&self, name: &str) -> Result<Option<LockObject>, LockError> {
        let key = self.shared().objects.key(name);
        let current = self.shared().objects.read(Op::Read, &key).await?;
        Ok(current.map(|cur| LockObject {
            name: name.to_owned(),
            key: key.to_string(),
            epoch: cur.body.epoch,
            note: cur.body.note_bytes(),
            lease: cur.body.lease(),
            holder: cur.body.holder,
        }))
    }

    /// The names of every object directly under the prefix (lock objects and any other),
    /// sorted; the self-probe's objects left out.
    ///
    /// # Errors
    /// Timeouts and store errors.
    ///
    /// # Cancel safety
    /// Cancel safe: it changes nothing.
    pub async fn names(&self) -> Result<Vec<String>, LockError> {
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
    ///
    /// # Cancel safety
    /// Cancel safe: the object is released or left as it was.
    pub async fn release_token(&self, name: &str, token: &str) -> Result<bool, LockError> {
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
        let seen = lock.inspect("a/b").await.expect("read").expect("there");
        assert_eq!(seen.holder.as_deref(), Some(token.to_hex().as_str()));
        assert_eq!(seen.epoch, lease.fencing_token());
        assert!(!lock.release_token("a/b", "00").await.expect("answers"));
        assert!(
            lock.release_token("a/b", token.to_hex().as_str())
                .await
                .expect("answers")
        );
        assert_eq!(
            lock.inspect("a/b")
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
