//! What an operator's tool (the `distlock` command) needs from the backend: releasing a lock
//! whose token it read rather than granted, and where every key of a lock lives — so the tool
//! never copies the release script or the key layout.

use lock_core::{LockError, Op, check_name};

use crate::RedisLock;
use crate::layout::{
    FAIR_ENTRIES_SUFFIX, FAIR_QUEUE_SUFFIX, FENCE_SUFFIX, HOLDER_SUFFIX, PERMIT_COUNTS_SUFFIX,
    PERMITS_SUFFIX, READERS_SUFFIX, RELEASED_SUFFIX, TURN_SUFFIX, WAITING_WRITERS_SUFFIX,
    WRITER_SUFFIX, fence_key, holder_key,
};

impl RedisLock {
    /// Releases the exclusive lock `name` if its key still holds `token_value` — the plain
    /// string the holder stored (`dl:` + 32 hex characters for a distlock holder, whatever
    /// another client wrote for a foreign one) — and announces the release on its channel, so
    /// waiters wake at once. The same atomic compare-and-delete a guard's release sends: a
    /// holder whose token differs is never touched.
    ///
    /// For operators who read the token from the key (`distlock release NAME --token T`,
    /// like `terraform force-unlock`); code that holds a [`Guard`](lock_core::Guard) releases
    /// through it.
    ///
    /// Returns `true` when the key held `token_value` and was deleted, `false` when it held
    /// another value or did not exist (nothing changed).
    ///
    /// # Errors
    /// [`LockError::InvalidInput`] for an empty or oversized name, a name that ends like a
    /// derived key, or an empty token (nothing sent); [`LockError::Timeout`] or
    /// [`LockError::Backend`] when Redis fails, as for any release.
    ///
    /// # Cancel safety
    /// Dropped before the answer, the release may or may not have run on the server; either
    /// way only a key that held `token_value` was deleted. Ask again to know.
    pub async fn release_token(&self, name: &str, token_value: &str) -> Result<bool, LockError> {
        check_name(name)?;
        if token_value.is_empty() {
            return Err(LockError::invalid("the token to release is empty"));
        }
        let key = self.checked_key(name)?;
        let (channel, holder) = (self.release_channel(name), holder_key(&key));
        // The holder's description goes with the lock, whoever wrote it.
        let (released, _conn): (i64, _) = self
            .run(
                Op::Release,
                self.release,
                &[&key],
                &[token_value, &channel, &holder],
            )
            .await?;
        Ok(released == 1)
    }

    /// Every key and channel of the lock `name` (see [`LockKeys`]).
    #[must_use]
    pub fn lock_keys(&self, name: &str) -> LockKeys {
        LockKeys::of_key(&self.key(name))
    }
}

/// Every key and channel that may exist for one lock key, all in its cluster slot: what an
/// operator's tool reads to describe the lock. Which of them exist depends on the kind in use
/// (see the crate docs, "Layout" and "Read-write locks, semaphores and fair locks").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockKeys {
    /// The lock key itself: a mutex's (or fair lock's) holder token, a plain string.
    pub key: String,
    /// The fencing counter: the last fencing token issued for the name.
    pub fence: String,
    /// The release channel (pub/sub; sharded on a cluster): its subscribers are the waiters.
    pub released: String,
    /// The holder's description, a JSON string, when the grant wrote one.
    pub holder: String,
    /// The read-write lock's writer token (a string).
    pub writer: String,
    /// The read-write lock's readers (sorted set: token → expiry in server ms).
    pub readers: String,
    /// The read-write lock's waiting writers (sorted set: token → when the record lapses).
    pub writers_waiting: String,
    /// The semaphore's holders (sorted set: token → expiry in server ms).
    pub permits: String,
    /// The semaphore's counts (hash: `max`, `used`, and permits per holder token).
    pub permit_counts: String,
    /// The fair lock's queue by arrival (sorted set: token → first queued, server µs).
    pub fair_queue: String,
    /// The fair lock's queue entries by lapse (sorted set: token → lapse, server ms).
    pub fair_entries: String,
    /// What every fair waiter's turn channel starts with (followed by its token).
    pub turn_prefix: String,
}

/// Which of a lock's keys a derived key is (see [`LockKeys::owner_of`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DerivedKey {
    /// [`LockKeys::fence`].
    Fence,
    /// [`LockKeys::released`].
    Released,
    /// [`LockKeys::holder`].
    Holder,
    /// [`LockKeys::writer`].
    Writer,
    /// [`LockKeys::readers`].
    Readers,
    /// [`LockKeys::writers_waiting`].
    WritersWaiting,
    /// [`LockKeys::permits`].
    Permits,
    /// [`LockKeys::permit_counts`].
    PermitCounts,
    /// [`LockKeys::fair_queue`].
    FairQueue,
    /// [`LockKeys::fair_entries`].
    FairEntries,
}

/// Every derived key's ending, with what it is.
const DERIVED: [(&str, DerivedKey); 10] = [
    (FENCE_SUFFIX, DerivedKey::Fence),
    (RELEASED_SUFFIX, DerivedKey::Released),
    (HOLDER_SUFFIX, DerivedKey::Holder),
    (WRITER_SUFFIX, DerivedKey::Writer),
    (READERS_SUFFIX, DerivedKey::Readers),
    (WAITING_WRITERS_SUFFIX, DerivedKey::WritersWaiting),
    (PERMITS_SUFFIX, DerivedKey::Permits),
    (PERMIT_COUNTS_SUFFIX, DerivedKey::PermitCounts),
    (FAIR_QUEUE_SUFFIX, DerivedKey::FairQueue),
    (FAIR_ENTRIES_SUFFIX, DerivedKey::FairEntries),
];

impl LockKeys {
    /// The keys of the lock at the Redis key `key` (the prefix already applied).
    #[must_use]
    pub fn of_key(key: &str) -> Self {
        Self {
            key: key.to_owned(),
            fence: derived(key, FENCE_SUFFIX),
            released: derived(key, RELEASED_SUFFIX),
            holder: derived(key, HOLDER_SUFFIX),
            writer: derived(key, WRITER_SUFFIX),
            readers: derived(key, READERS_SUFFIX),
            writers_waiting: derived(key, WAITING_WRITERS_SUFFIX),
            permits: derived(key, PERMITS_SUFFIX),
            permit_counts: derived(key, PERMIT_COUNTS_SUFFIX),
            fair_queue: derived(key, FAIR_QUEUE_SUFFIX),
            fair_entries: derived(key, FAIR_ENTRIES_SUFFIX),
            turn_prefix: derived(key, TURN_SUFFIX),
        }
    }

    /// The lock key that the derived key `derived_key` belongs to, and which of its keys it
    /// is; `None` when it is not a derived key (a lock key, or someone else's).
    ///
    /// A derivation can be ambiguous: the lock keys `a` and `{a}` share `{a}:distlock-fence`
    /// (both hash on `a`). The key without braces is returned then, the common case; callers
    /// that know the lock key should compare with [`LockKeys::of_key`] instead.
    #[must_use]
    pub fn owner_of(derived_key: &str) -> Option<(String, DerivedKey)> {
        let (suffix, which) = DERIVED
            .iter()
            .find(|(suffix, _)| derived_key.ends_with(suffix))?;
        let base = &derived_key[..derived_key.len() - suffix.len()];
        let candidates = [
            // `{key}`: a key with no `}` became its own tag.
            base.strip_prefix('{').and_then(|b| b.strip_suffix('}')),
            // `{t}key`: a short tag of the slot went in front.
            base.strip_prefix('{')
                .and_then(|b| b.split_once('}'))
                .map(|(_, rest)| rest),
            // `key` with a hash tag of its own.
            Some(base),
        ];
        candidates
            .into_iter()
            .flatten()
            .find(|key| derived(key, suffix) == derived_key)
            .map(|key| (key.to_owned(), *which))
    }
}

/// `key`'s derived key ending with `suffix`, in `key`'s slot: the fencing counter's derivation
/// with another ending, so that one rule (the layout module's) places every key.
fn derived(key: &str, suffix: &str) -> String {
    let mut k = fence_key(key);
    k.truncate(k.len() - FENCE_SUFFIX.len());
    k.push_str(suffix);
    k
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key_slot;

    #[test]
    fn every_key_finds_its_owner() {
        for key in ["order:42", "{tenant}:order:42", "a}b", "x{}y", "}{", "ü{ß}"] {
            let keys = LockKeys::of_key(key);
            for (derived_key, which) in [
                (&keys.fence, DerivedKey::Fence),
                (&keys.released, DerivedKey::Released),
                (&keys.holder, DerivedKey::Holder),
                (&keys.writer, DerivedKey::Writer),
                (&keys.readers, DerivedKey::Readers),
                (&keys.writers_waiting, DerivedKey::WritersWaiting),
                (&keys.permits, DerivedKey::Permits),
                (&keys.permit_counts, DerivedKey::PermitCounts),
                (&keys.fair_queue, DerivedKey::FairQueue),
                (&keys.fair_entries, DerivedKey::FairEntries),
            ] {
                assert_eq!(key_slot(derived_key), key_slot(key), "{derived_key}");
                assert_eq!(
                    LockKeys::owner_of(derived_key),
                    Some((key.to_owned(), which)),
                    "{derived_key}"
                );
            }
            assert_eq!(LockKeys::owner_of(key), None);
        }
        assert_eq!(
            LockKeys::of_key("order:42").holder,
            "{order:42}:distlock-holder"
        );
    }
}
