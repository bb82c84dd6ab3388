//! Where a lock lives in Redis: its key, its fencing counter, its release channel and every
//! key of its kind, all in one cluster hash slot (safety rule 3). [`Keys`] is the one answer to
//! "which keys does the lock `n` use": every kind's operations take their keys from it, and the
//! operators' list ([`LockKeys`]) is made from it.

pub(crate) mod slot;

use lock_core::{Kind, LockError};

use crate::layout::slot::derived;

/// The end of every fencing counter key. Lock keys may not end with it (see [`reserved`]).
const FENCE_SUFFIX: &str = ":distlock-fence";

/// The end of every release channel name (and of the waiting mark, a key of the same name).
pub(crate) const RELEASED_SUFFIX: &str = ":distlock-released";

/// The end of the key that holds the note written beside a mutex grant
/// ([`Lock::annotate`](lock_core::backend::Lock::annotate)): the grant's token, its fencing
/// token and the note, kept as long as the fencing counter. A grant with holder metadata writes
/// its description here, in the same layout, expiring with its lease. The one holder
/// description: what leader election's observers and `distlock ls`/`show` read
/// (`lua/describe_holder.lua`, `holder.rs`).
const NOTE_SUFFIX: &str = ":distlock-note";

/// The ends of the keys of a read-write lock: its writer (a string), its readers and its
/// waiting writers (sorted sets scored by expiry).
const WRITER_SUFFIX: &str = ":distlock-writer";
const READERS_SUFFIX: &str = ":distlock-readers";
const WAITING_WRITERS_SUFFIX: &str = ":distlock-writers-waiting";

/// The ends of the keys of a semaphore: its holders (a sorted set scored by expiry) and its
/// counts (a hash: max, used, permits per holder).
const PERMITS_SUFFIX: &str = ":distlock-permits";
const PERMIT_COUNTS_SUFFIX: &str = ":distlock-permit-counts";

/// The ends of the keys of a fair lock's queue: its waiters by arrival and by when each entry
/// lapses (sorted sets); and the start of the waiters' turn channels.
const FAIR_QUEUE_SUFFIX: &str = ":distlock-fair-queue";
const FAIR_ENTRIES_SUFFIX: &str = ":distlock-fair-entries";
const TURN_SUFFIX: &str = ":distlock-turn:";

/// How a value that distlock wrote under a lock key starts: the token follows, as 32 lowercase
/// hex characters (`dl:` + hex, 35 characters in all).
///
/// The value stays a plain string, so redis-py, node-redlock and redsync, which read nothing but
/// their own tokens, exclude a distlock holder as before. What the prefix adds is knowledge for
/// a distlock *waiter*: a holder whose value has it announces its release on the name's
/// channel, and the waiter sleeps until that announcement; any other value (redis-py's uuid4
/// hex, node-redlock's random hex, redsync's base64) never announces, and the waiter polls with
/// its backoff instead. `lua/acquire.lua` tests the same three characters.
pub const TOKEN_PREFIX: &str = "dl:";

/// The value distlock stores under a lock key for `token`: [`TOKEN_PREFIX`] + its hex form.
#[must_use]
pub fn token_value(token: &lock_core::Token) -> TokenValue {
    let mut value = [0u8; 35];
    value[..3].copy_from_slice(TOKEN_PREFIX.as_bytes());
    value[3..].copy_from_slice(token.to_hex().as_bytes());
    TokenValue(value)
}

/// Whether a lock key's value was written by distlock, whose holders announce their releases.
pub(crate) fn announces(value: &[u8]) -> bool {
    value.starts_with(TOKEN_PREFIX.as_bytes())
}

/// The value stored under a lock key for one token (see [`token_value`]); `as_str()` borrows
/// it, without allocating.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct TokenValue([u8; 35]);

impl TokenValue {
    /// The 35 characters: `dl:` and 32 hex digits.
    #[must_use]
    pub fn as_str(&self) -> &str {
        // Only the ASCII prefix and hex digits are ever written into the buffer.
        std::str::from_utf8(&self.0).unwrap_or_default()
    }
}

impl std::fmt::Debug for TokenValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::fmt::Display for TokenValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whether `key` ends like a derived key; such names are refused so a lock can never land on
/// another lock's counter, channel, readers or permits.
fn reserved(key: &str) -> bool {
    DERIVED.iter().any(|(suffix, _)| key.ends_with(suffix))
}

/// Every key and channel of the lock at one Redis key, each derived when asked for: the one
/// answer to "which keys does the lock `n` use". Every kind's operations take their keys from
/// here, and [`LockKeys`], the operators' list, is made here; no other code knows a suffix.
///
/// Derived on demand rather than all at once: an acquire needs two of the thirteen, and each is
/// an allocation on the hot path.
#[derive(Debug, Clone)]
pub(crate) struct Keys {
    key: String,
}

impl Keys {
    /// The keys of the lock `name` under `prefix`: its key is the prefix followed by the name.
    pub(crate) fn new(prefix: &str, name: &str) -> Self {
        let mut key = String::with_capacity(prefix.len() + name.len());
        key.push_str(prefix);
        key.push_str(name);
        Self { key }
    }

    /// The same, refused when the key ends like one of distlock's derived keys: the name of a
    /// lock to take.
    ///
    /// # Errors
    /// [`LockError::InvalidInput`] for such a key.
    pub(crate) fn checked(prefix: &str, name: &str) -> Result<Self, LockError> {
        let keys = Self::new(prefix, name);
        if reserved(&keys.key) {
            return Err(LockError::invalid(format!(
                "the lock key {:?} ends like one of distlock's own keys (fencing counter, channel, readers, permits)",
                keys.key
            )));
        }
        Ok(keys)
    }

    /// The keys of the lock at the Redis key `key` (the prefix already applied).
    pub(crate) fn from_key(key: &str) -> Self {
        Self {
            key: key.to_owned(),
        }
    }

    /// The lock key: a mutex's (or fair lock's) holder token, a plain string.
    pub(crate) fn key(&self) -> &str {
        &self.key
    }

    /// The lock key, owned.
    pub(crate) fn into_key(self) -> String {
        self.key
    }

    /// The fencing counter: the last fencing token issued for the name.
    pub(crate) fn fence(&self) -> String {
        derived(&self.key, FENCE_SUFFIX)
    }

    /// The channel a release is announced on, and the waiting mark (a key of the same name,
    /// left by a busy attempt so that the holder's release announces itself).
    pub(crate) fn released(&self) -> String {
        derived(&self.key, RELEASED_SUFFIX)
    }

    /// The key of the note written beside a mutex grant (see [`NOTE_SUFFIX`]).
    pub(crate) fn note(&self) -> String {
        derived(&self.key, NOTE_SUFFIX)
    }

    /// The read-write lock's keys: writer, readers, waiting writers.
    pub(crate) fn read_write(&self) -> [String; 3] {
        [WRITER_SUFFIX, READERS_SUFFIX, WAITING_WRITERS_SUFFIX]
            .map(|suffix| derived(&self.key, suffix))
    }

    /// The semaphore's keys: holders, counts.
    pub(crate) fn semaphore(&self) -> [String; 2] {
        [PERMITS_SUFFIX, PERMIT_COUNTS_SUFFIX].map(|suffix| derived(&self.key, suffix))
    }

    /// The fair queue's keys: by arrival, by lapse.
    pub(crate) fn fair_queue(&self) -> [String; 2] {
        [FAIR_QUEUE_SUFFIX, FAIR_ENTRIES_SUFFIX].map(|suffix| derived(&self.key, suffix))
    }

    /// What every fair waiter's turn channel starts with.
    pub(crate) fn turn_prefix(&self) -> String {
        derived(&self.key, TURN_SUFFIX)
    }

    /// The turn channel of the fair waiter whose token value is `token`: where the release
    /// that makes it the head's turn is announced.
    pub(crate) fn turn(&self, token: &str) -> String {
        let mut channel = self.turn_prefix();
        channel.push_str(token);
        channel
    }

    /// Every key the lock of `kind` may write: see [`LockKeys::of_kind`].
    pub(crate) fn of_kind(&self, kind: Kind) -> Vec<String> {
        match kind {
            Kind::Read { .. } | Kind::Write { .. } => {
                let mut keys = self.read_write().to_vec();
                keys.push(self.fence());
                keys
            }
            Kind::Semaphore { .. } => self.semaphore().to_vec(),
            Kind::Fair { .. } => {
                let [queue, entries] = self.fair_queue();
                vec![
                    self.key.clone(),
                    self.fence(),
                    queue,
                    entries,
                    self.released(),
                    self.note(),
                ]
            }
            _ => vec![self.key.clone(), self.fence(), self.released(), self.note()],
        }
    }

    /// Every key and channel, listed for an operator.
    pub(crate) fn listed(&self) -> LockKeys {
        let [writer, readers, writers_waiting] = self.read_write();
        let [permits, permit_counts] = self.semaphore();
        let [fair_queue, fair_entries] = self.fair_queue();
        LockKeys {
            key: self.key.clone(),
            fence: self.fence(),
            released: self.released(),
            note: self.note(),
            writer,
            readers,
            writers_waiting,
            permits,
            permit_counts,
            fair_queue,
            fair_entries,
            turn_prefix: self.turn_prefix(),
        }
    }
}

/// Every key and channel that may exist for one lock key, all in its cluster slot: what an
/// operator's tool reads to describe the lock. Which of them exist depends on the kind in use
/// (see the crate docs, "Layout" and "Read-write locks, semaphores and fair locks";
/// [`LockKeys::of_kind`] picks them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockKeys {
    /// The lock key itself: a mutex's (or fair lock's) holder token, a plain string.
    pub key: String,
    /// The fencing counter: the last fencing token issued for the name.
    pub fence: String,
    /// The release channel (pub/sub; sharded on a cluster): its subscribers are the waiters.
    /// A key of the same name is the waiting mark, left by a busy attempt (see the crate
    /// README, "Release announcements").
    pub released: String,
    /// The note written beside a mutex (or fair) grant by
    /// [`Lock::annotate`](lock_core::backend::Lock::annotate): a string, the grant's token, a
    /// newline, its fencing token, a newline, then the note's bytes; kept as long as the
    /// fencing counter, and shown only while its token holds the key.
    pub note: String,
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
    /// [`LockKeys::note`].
    Note,
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

/// Every derived key's ending, with what it is. A lock key may end with none of them.
const DERIVED: [(&str, DerivedKey); 10] = [
    (FENCE_SUFFIX, DerivedKey::Fence),
    (RELEASED_SUFFIX, DerivedKey::Released),
    (NOTE_SUFFIX, DerivedKey::Note),
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
        Keys::from_key(key).listed()
    }

    /// Every key the lock of `kind` may write, in this order: for a mutex the key, its fencing
    /// counter, its waiting mark (named like the release channel, left by a busy attempt; see
    /// the crate README, "Release announcements"), then the note written beside a grant
    /// ([`Lock::annotate`](lock_core::backend::Lock::annotate), or the grant itself with
    /// [`holder_metadata`](crate::RedisLockBuilder::holder_metadata)); for a read-write lock
    /// its writer, readers and waiting writers and the fencing counter; for a semaphore its
    /// holders and counts; for a fair lock the mutex's key and counter, its queue's two (by
    /// arrival, by lapse), the waiting mark and the note. (The release channel is
    /// [`released`](LockKeys::released) for every kind.)
    #[must_use]
    pub fn of_kind(&self, kind: Kind) -> Vec<String> {
        Keys::from_key(&self.key).of_kind(kind)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::slot::key_slot;

    // The derivations under the names these tests grew up with.
    fn fence_key(key: &str) -> String {
        Keys::from_key(key).fence()
    }
    fn release_channel(key: &str) -> String {
        Keys::from_key(key).released()
    }
    fn turn_channel(key: &str, token: &str) -> String {
        Keys::from_key(key).turn(token)
    }
    fn rw_keys(key: &str) -> [String; 3] {
        Keys::from_key(key).read_write()
    }
    fn semaphore_keys(key: &str) -> [String; 2] {
        Keys::from_key(key).semaphore()
    }
    fn fair_keys(key: &str) -> [String; 2] {
        Keys::from_key(key).fair_queue()
    }

    #[test]
    fn every_key_finds_its_owner() {
        for key in ["order:42", "{tenant}:order:42", "a}b", "x{}y", "}{", "ü{ß}"] {
            let keys = LockKeys::of_key(key);
            for (derived_key, which) in [
                (&keys.fence, DerivedKey::Fence),
                (&keys.released, DerivedKey::Released),
                (&keys.note, DerivedKey::Note),
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
            LockKeys::of_key("order:42").note,
            "{order:42}:distlock-note"
        );
    }

    #[test]
    fn the_waiting_mark_is_the_fence_key_with_released_for_fence() {
        // lua/acquire.lua finds the waiting mark (named like the release channel) this way.
        for key in ["order:42", "{tag}order", "a}b", "", "{}x"] {
            let fence = fence_key(key);
            let mark = format!("{}released", &fence[..fence.len() - "fence".len()]);
            assert_eq!(mark, release_channel(key), "key {key:?}");
            // ... and the note, where a grant writes its description (lua/acquire.lua,
            // handover.lua).
            let note = format!("{}note", &fence[..fence.len() - "fence".len()]);
            assert_eq!(note, Keys::from_key(key).note(), "key {key:?}");
        }
    }

    #[test]
    fn derived_keys_share_the_slot() {
        for key in [
            "order:42",
            "{tenant}:order:42",
            "a}b",
            "x{}y",
            "}{",
            "{",
            "}",
            "{{}}",
            "a{b",
            "ü{ß}",
        ] {
            let slot = key_slot(key);
            assert_eq!(
                key_slot(&fence_key(key)),
                slot,
                "fence key of {key:?}: {}",
                fence_key(key)
            );
            assert_eq!(key_slot(&release_channel(key)), slot, "channel of {key:?}");
            assert_eq!(
                key_slot(&turn_channel(key, "dl:0a")),
                slot,
                "turn of {key:?}"
            );
            for derived in rw_keys(key)
                .iter()
                .chain(&semaphore_keys(key))
                .chain(&fair_keys(key))
            {
                assert_eq!(key_slot(derived), slot, "{derived:?} of {key:?}");
                assert!(reserved(derived));
            }
            assert!(reserved(&fence_key(key)) && !reserved(key));
        }
    }

    proptest::proptest! {
        // Any key at all — braces anywhere, unicode, empty tags — keeps its counter and channel
        // in its own slot, and a derived key is never a key a lock could have.
        #[test]
        fn derived_keys_share_the_slot_of_any_key(key in "\\PC{0,40}|[{}a-c]{0,12}") {
            let slot = key_slot(&key);
            proptest::prop_assert_eq!(key_slot(&fence_key(&key)), slot, "fence key of {:?}", key);
            proptest::prop_assert_eq!(key_slot(&release_channel(&key)), slot, "channel of {:?}", key);
            proptest::prop_assert!(reserved(&fence_key(&key)) && reserved(&release_channel(&key)));
            proptest::prop_assert_ne!(fence_key(&key), release_channel(&key));
            if !reserved(&key) {
                proptest::prop_assert_ne!(fence_key(&key), key.clone());
            }
        }
    }
}
