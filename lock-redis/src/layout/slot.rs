//! Redis Cluster hash slots: the slot of a key, and the derived keys that share their lock
//! key's slot (safety rule 3), whatever braces the lock key holds.

use std::sync::OnceLock;

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
pub(crate) fn hash_tag(key: &str) -> Option<&str> {
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
pub(crate) fn derived(key: &str, suffix: &str) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

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
    fn every_slot_has_a_tag() {
        for slot in 0..SLOTS {
            assert_eq!(key_slot(&slot_tag(slot).to_string()), slot);
        }
    }
}
