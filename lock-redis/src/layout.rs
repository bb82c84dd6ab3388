//! Where a lock lives in Redis: its key, its fencing counter and its release channel, all in
//! one cluster hash slot (safety rule 3).

use std::sync::OnceLock;

/// The end of every fencing counter key. Lock keys may not end with it (see [`reserved`]).
pub(crate) const FENCE_SUFFIX: &str = ":distlock-fence";

/// The end of every release channel name.
pub(crate) const RELEASED_SUFFIX: &str = ":distlock-released";

/// The ends of the keys of a read-write lock: its writer (a string), its readers and its
/// waiting writers (sorted sets scored by expiry).
pub(crate) const WRITER_SUFFIX: &str = ":distlock-writer";
pub(crate) const READERS_SUFFIX: &str = ":distlock-readers";
pub(crate) const WAITING_WRITERS_SUFFIX: &str = ":distlock-writers-waiting";

/// The ends of the keys of a semaphore: its holders (a sorted set scored by expiry) and its
/// counts (a hash: max, used, permits per holder).
pub(crate) const PERMITS_SUFFIX: &str = ":distlock-permits";
pub(crate) const PERMIT_COUNTS_SUFFIX: &str = ":distlock-permit-counts";

/// The ends of the keys of a fair lock's queue: its waiters by arrival and by when each entry
/// lapses (sorted sets); and the start of the waiters' turn channels.
pub(crate) const FAIR_QUEUE_SUFFIX: &str = ":distlock-fair-queue";
pub(crate) const FAIR_ENTRIES_SUFFIX: &str = ":distlock-fair-entries";
pub(crate) const TURN_SUFFIX: &str = ":distlock-turn:";

/// Every suffix of a derived key; a lock key may end with none of them.
const SUFFIXES: [&str; 9] = [
    FAIR_QUEUE_SUFFIX,
    FAIR_ENTRIES_SUFFIX,
    FENCE_SUFFIX,
    RELEASED_SUFFIX,
    WRITER_SUFFIX,
    READERS_SUFFIX,
    WAITING_WRITERS_SUFFIX,
    PERMITS_SUFFIX,
    PERMIT_COUNTS_SUFFIX,
];

/// Redis Cluster has 16,384 hash slots.
const SLOTS: u16 = 16_384;

/// The cluster hash slot of `key`: CRC16 (XMODEM) of its hash tag, or of the whole key when it
/// has none, modulo 16,384 (Redis Cluster specification, "Hash tags").
#[must_use]
pub fn key_slot(key: &str) -> u16 {
    const CRC16: crc::Crc<u16> = crc::Crc::<u16>::new(&crc::CRC_16_XMODEM);
    let hashed = hash_tag(key).unwrap_or(key);
    CRC16.checksum(hashed.as_bytes()) % SLOTS
}

/// The hash tag of `key`: what lies between its first `{` and the first `}` after it, when that
/// is not empty.
fn hash_tag(key: &str) -> Option<&str> {
    let open = key.find('{')?;
    let rest = &key[open + 1..];
    let close = rest.find('}')?;
    (close > 0).then(|| &rest[..close])
}

/// `key`'s derived key with `suffix`, starting so that it hashes to `key`'s slot:
/// - `key` has a hash tag: `key` itself (appending keeps the tag);
/// - `key` is not empty and has no `}`: `{key}` (the whole key becomes the tag);
/// - otherwise (a `}` but no usable tag, say `a}b`, or the empty key): `{t}key`, where `t` is a
///   short tag of the same slot.
///
/// Written into one buffer of the right size: this runs on every acquire and release, where
/// `format!` cost more than the rest of the key handling (callgrind).
fn derived(key: &str, suffix: &str) -> String {
    let mut k = String::with_capacity(key.len() + suffix.len() + 12);
    if hash_tag(key).is_some() {
        k.push_str(key);
    } else if !key.is_empty() && !key.contains('}') {
        k.push('{');
        k.push_str(key);
        k.push('}');
    } else {
        k.push('{');
        k.push_str(&slot_tag(key_slot(key)).to_string());
        k.push('}');
        k.push_str(key);
    }
    k.push_str(suffix);
    k
}

/// A short tag whose slot is `slot`: the first decimal number that hashes there, found once for
/// all 16,384 slots (about 160,000 CRCs, a few milliseconds) and kept.
fn slot_tag(slot: u16) -> u32 {
    static TAGS: OnceLock<Vec<u32>> = OnceLock::new();
    let tags = TAGS.get_or_init(|| {
        let mut tags = vec![u32::MAX; usize::from(SLOTS)];
        let mut missing = usize::from(SLOTS);
        let mut n = 0u32;
        // Bounded: every slot is hit well before 2^24 numbers (expected ~170,000).
        while missing > 0 && n < 1 << 24 {
            let s = usize::from(key_slot(&n.to_string()));
            if tags[s] == u32::MAX {
                tags[s] = n;
                missing -= 1;
            }
            n += 1;
        }
        tags
    });
    tags[usize::from(slot)]
}

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
    value[3..].copy_from_slice(token.to_hex().as_str().as_bytes());
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

/// The fencing counter key of the lock at `key`.
pub(crate) fn fence_key(key: &str) -> String {
    derived(key, FENCE_SUFFIX)
}

/// The channel a release of the lock at `key` is announced on.
pub(crate) fn release_channel(key: &str) -> String {
    derived(key, RELEASED_SUFFIX)
}

/// The keys of the read-write lock named by `key`: writer, readers, waiting writers.
pub(crate) fn rw_keys(key: &str) -> [String; 3] {
    [WRITER_SUFFIX, READERS_SUFFIX, WAITING_WRITERS_SUFFIX].map(|suffix| derived(key, suffix))
}

/// The keys of the semaphore named by `key`: holders, counts.
pub(crate) fn semaphore_keys(key: &str) -> [String; 2] {
    [PERMITS_SUFFIX, PERMIT_COUNTS_SUFFIX].map(|suffix| derived(key, suffix))
}

/// The keys of the fair queue of the lock at `key`: by arrival, by lapse.
pub(crate) fn fair_keys(key: &str) -> [String; 2] {
    [FAIR_QUEUE_SUFFIX, FAIR_ENTRIES_SUFFIX].map(|suffix| derived(key, suffix))
}

/// The turn channel of the fair waiter whose token value is `token`: where the release that
/// makes it the head's turn is announced, in the slot of `key`.
pub(crate) fn turn_channel(key: &str, token: &str) -> String {
    let mut channel = turn_prefix(key);
    channel.push_str(token);
    channel
}

/// What every turn channel of the lock at `key` starts with.
pub(crate) fn turn_prefix(key: &str) -> String {
    derived(key, TURN_SUFFIX)
}

/// Whether `key` ends like a derived key; such names are refused so a lock can never land on
/// another lock's counter, channel, readers or permits.
pub(crate) fn reserved(key: &str) -> bool {
    SUFFIXES.iter().any(|suffix| key.ends_with(suffix))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_waiting_mark_is_the_fence_key_with_released_for_fence() {
        // lua/acquire.lua finds the waiting mark (named like the release channel) this way.
        for key in ["order:42", "{tag}order", "a}b", "", "{}x"] {
            let fence = fence_key(key);
            let mark = format!("{}released", &fence[..fence.len() - "fence".len()]);
            assert_eq!(mark, release_channel(key), "key {key:?}");
        }
    }

    #[test]
    fn slots_match_the_cluster_spec_examples() {
        // Values from the Redis Cluster specification and CLUSTER KEYSLOT.
        assert_eq!(key_slot("123456789"), 12_739);
        assert_eq!(key_slot("foo"), 12_182);
        assert_eq!(
            key_slot("{user1000}.following"),
            key_slot("{user1000}.followers")
        );
        assert_eq!(key_slot("foo{}{bar}"), key_slot("foo{}{bar}"));
        assert_eq!(key_slot("foo{{bar}}zap"), key_slot("{bar"));
        assert_eq!(key_slot("foo{bar}{zap}"), key_slot("bar"));
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

    #[test]
    fn every_slot_has_a_tag() {
        for slot in 0..SLOTS {
            assert_eq!(key_slot(&slot_tag(slot).to_string()), slot);
        }
    }
}
