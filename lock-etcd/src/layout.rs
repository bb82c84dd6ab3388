//! The data layout: one key per lock, holding the holder's token, attached to an etcd lease of
//! the holder's own whose id is derived from the token ([`EtcdLease`]); and the key spaces beside the lock keys
//! (semaphore holders, fair queues, readers, waiting writers, fences, notes), the one place
//! that knows them.

use std::time::Duration;

use lock_core::{Kind, Lease, Token};

/// What a distlock holder's value starts with, followed by the token's 32 hex digits: the
/// layout of lock-redis, so a waiter can tell a distlock holder (which announces its release)
/// from a key written by another client.
pub(crate) const VALUE_PREFIX: &str = "dl:";

/// The key of the lock `name` under `prefix`.
pub(crate) fn key(prefix: &str, name: &str) -> Vec<u8> {
    let mut key = Vec::with_capacity(prefix.len() + name.len());
    key.extend_from_slice(prefix.as_bytes());
    key.extend_from_slice(name.as_bytes());
    key
}

/// Checks a lock name for etcd: lock-core's rules (not empty, at most `MAX_NAME_LEN` bytes), and
/// no NUL as its first byte. Names that start with NUL are distlock's own key spaces under the
/// prefix (`\0sem/`, `\0fair/`, `\0rwr/`, `\0rww/`, `\0rwf/`, `\0note/`, `\0acc/`): a lock of such a
/// name would share keys with another lock's semaphore holders, readers or note.
///
/// # Errors
/// [`LockError::InvalidInput`](lock_core::LockError::InvalidInput) for a name that breaks them.
pub(crate) fn check_name(name: &str) -> Result<(), lock_core::LockError> {
    lock_core::check_name(name)?;
    if name.starts_with('\0') {
        return Err(lock_core::LockError::invalid(
            "a lock name on etcd must not start with NUL: those keys are distlock's own \
             (semaphore holders, readers, fair queues, notes)",
        ));
    }
    Ok(())
}

/// The value a holder with `token` stores: `dl:` + 32 hex digits.
pub(crate) fn value(token: &Token) -> Vec<u8> {
    let mut value = Vec::with_capacity(VALUE_PREFIX.len() + 32);
    value.extend_from_slice(VALUE_PREFIX.as_bytes());
    value.extend_from_slice(token.to_hex().as_str().as_bytes());
    value
}

/// Whether a stored value was written by distlock (whose holders announce their release).
pub(crate) fn is_ours_layout(value: &[u8]) -> bool {
    value.starts_with(VALUE_PREFIX.as_bytes())
}

/// An etcd lease, by its id: etcd's own expiring grant, which every key put on it goes with.
/// Not distlock's [`Lease`] (a granted lock), though each distlock lease is carried by one: the
/// grant's keys sit on the etcd lease of [`EtcdLease::of_grant`], and a renewal keeps that etcd
/// lease alive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EtcdLease(i64);

impl EtcdLease {
    /// The etcd lease that carries the keys of `name` held with `token`.
    pub(crate) fn of_grant(token: &Token, name: &str) -> Self {
        Self(etcd_lease_id(token, name))
    }

    /// The etcd lease of `token`'s queue entry for the fair lock `name` (not the grant's: the
    /// entry lives on while the grant's etcd lease of a busy attempt is revoked).
    pub(crate) fn of_queue_entry(token: &Token, name: &str) -> Self {
        Self(etcd_lease_id(token, &format!("\0fair/{name}")))
    }

    /// The etcd lease of the waiting record of the writer `token` of `name` (not the writer's
    /// grant's).
    pub(crate) fn of_waiting_record(token: &Token, name: &str) -> Self {
        Self(etcd_lease_id(token, &format!("\0rww/{name}")))
    }

    /// The id etcd's requests name this lease by.
    pub(crate) fn id(self) -> i64 {
        self.0
    }
}

/// The id of the etcd lease that carries the key of `name` held with `token`: 63 bits of the
/// token mixed with a hash of the name (FNV-1a), never 0 (etcd's "pick one for me").
///
/// Deriving it, rather than remembering what the server chose, is what lets `extend` and
/// `release` act on a distlock [`Lease`] alone (it has no room for backend data), and a
/// cancelled acquire be cleaned up by its token. Tokens are 128 random bits, fresh for every
/// acquisition, so two grants share an etcd lease id with odds of 2⁻⁶³; if they did, the
/// second grant's etcd lease request fails (etcd refuses an id in use) and nothing is granted.
fn etcd_lease_id(token: &Token, name: &str) -> i64 {
    const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut hash = FNV_OFFSET;
    for byte in name.as_bytes() {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(FNV_PRIME);
    }
    let mut head = [0_u8; 8];
    head.copy_from_slice(&token.as_bytes()[..8]);
    let mixed = (u64::from_le_bytes(head) ^ hash) & (i64::MAX as u64);
    i64::try_from(mixed).unwrap_or(1).max(1)
}

/// A TTL in etcd's unit, whole seconds, rounded up (at least 1). etcd raises it further to
/// its minimum lease TTL (1.5 election timeouts, 2 s with the default timing): a key may
/// outlive the lease the client counts with, never the other way round.
pub(crate) fn ttl_seconds(ttl: Duration) -> i64 {
    let whole = ttl.as_secs() + u64::from(ttl.subsec_nanos() > 0);
    i64::try_from(whole.max(1)).unwrap_or(i64::MAX)
}

/// What separates the semaphore keys from the lock keys under the prefix.
pub(crate) const SEMAPHORE: &[u8] = b"\0sem/";

/// What separates the fair queue's keys from the lock keys under the prefix.
pub(crate) const FAIR: &[u8] = b"\0fair/";

/// The space of readers' keys.
pub(crate) const READERS: &[u8] = b"\0rwr/";
/// The space of waiting writers' records.
pub(crate) const WAITING: &[u8] = b"\0rww/";
/// The space of fence keys.
pub(crate) const FENCE: &[u8] = b"\0rwf/";

/// What separates the note keys from the lock keys under the prefix.
pub(crate) const NOTE: &[u8] = b"\0note/";

/// The space of fence records: per fenced resource, the largest fencing token a guarded write
/// was admitted with (`fence.rs`).
pub(crate) const ACCEPTED: &[u8] = b"\0acc/";

/// The start of the range of `name`'s keys in the space `mark` (semaphore holders, fair
/// waiters): `prefix + mark + len(name) + ":" + name + "/"`.
pub(crate) fn under(mark: &[u8], prefix: &str, name: &str) -> Vec<u8> {
    let mut key = Vec::with_capacity(prefix.len() + mark.len() + name.len() + 8);
    key.extend_from_slice(prefix.as_bytes());
    key.extend_from_slice(mark);
    key.extend_from_slice(format!("{}:", name.len()).as_bytes());
    key.extend_from_slice(name.as_bytes());
    key.push(b'/');
    key
}

pub(crate) fn range_end(start: &[u8]) -> Vec<u8> {
    let mut end = start.to_vec();
    // `holders` ends with '/', which is below 0xff: adding one ends the range at the next key.
    if let Some(last) = end.last_mut() {
        *last += 1;
    }
    end
}

/// The name whose semaphore holder or fair waiter the key `key` (under `prefix`) is.
pub(crate) fn name_of<'k>(prefix: &[u8], key: &'k [u8]) -> Option<&'k [u8]> {
    let rest = key.strip_prefix(prefix)?;
    let rest = [SEMAPHORE, FAIR, READERS, WAITING]
        .iter()
        .find_map(|mark| rest.strip_prefix(*mark))?;
    let colon = rest.iter().position(|b| *b == b':')?;
    let len: usize = std::str::from_utf8(&rest[..colon]).ok()?.parse().ok()?;
    rest.get(colon + 1..colon + 1 + len)
}

/// The range that holds every holder key of `name`.
pub(crate) fn holders(prefix: &str, name: &str) -> Vec<u8> {
    under(SEMAPHORE, prefix, name)
}

/// The key of the holder `token` of `name`.
pub(crate) fn holder_key(prefix: &str, name: &str, token: &Token) -> Vec<u8> {
    let mut key = holders(prefix, name);
    key.extend_from_slice(token.to_hex().as_str().as_bytes());
    key
}

/// What the holder `token` stores: its token in the lock layout, its permits and `max`.
pub(crate) fn holder_value(token: &Token, permits: u32, max: u32) -> Vec<u8> {
    let mut stored = value(token);
    stored.extend_from_slice(format!(" {permits} {max}").as_bytes());
    stored
}

/// The queue entry of `token` for `name`.
pub(crate) fn entry_key(prefix: &str, name: &str, token: &Token) -> Vec<u8> {
    let mut key = under(FAIR, prefix, name);
    key.extend_from_slice(token.to_hex().as_str().as_bytes());
    key
}

/// The key of the reader `token` of `name`.
pub(crate) fn reader_key(prefix: &str, name: &str, token: &Token) -> Vec<u8> {
    let mut key = under(READERS, prefix, name);
    key.extend_from_slice(token.to_hex().as_str().as_bytes());
    key
}

/// The waiting record of the writer `token` of `name`.
pub(crate) fn waiting_key(prefix: &str, name: &str, token: &Token) -> Vec<u8> {
    let mut key = under(WAITING, prefix, name);
    key.extend_from_slice(token.to_hex().as_str().as_bytes());
    key
}

/// The key `lease` holds and the value it put there, by its kind: a semaphore holder's key, a
/// reader's key, or the name's lock key (the mutex, the fair lock, a writer).
pub(crate) fn held(prefix: &str, lease: &Lease) -> (Vec<u8>, Vec<u8>) {
    match lease.kind() {
        Kind::Semaphore { permits, max } => (
            holder_key(prefix, lease.name(), lease.token()),
            holder_value(lease.token(), permits, max),
        ),
        Kind::Read { .. } => (
            reader_key(prefix, lease.name(), lease.token()),
            value(lease.token()),
        ),
        _ => (key(prefix, lease.name()), value(lease.token())),
    }
}

/// The note key of `name` (the holder description beside its grant, `kinds/note.rs`).
pub(crate) fn note_key(prefix: &str, name: &str) -> Vec<u8> {
    under(NOTE, prefix, name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttl_rounds_up_to_whole_seconds() {
        assert_eq!(ttl_seconds(Duration::from_millis(1)), 1);
        assert_eq!(ttl_seconds(Duration::from_millis(1_000)), 1);
        assert_eq!(ttl_seconds(Duration::from_millis(1_001)), 2);
        assert_eq!(ttl_seconds(Duration::ZERO), 1);
    }

    #[test]
    fn etcd_lease_ids_are_positive_and_differ_by_name_and_token() {
        let a = Token::from_bytes([7; 16]);
        let b = Token::from_bytes([8; 16]);
        let ids = [
            etcd_lease_id(&a, "x"),
            etcd_lease_id(&a, "y"),
            etcd_lease_id(&b, "x"),
        ];
        assert!(ids.iter().all(|id| *id > 0), "{ids:?}");
        assert_ne!(ids[0], ids[1]);
        assert_ne!(ids[0], ids[2]);
        assert_eq!(
            etcd_lease_id(&a, "x"),
            ids[0],
            "derived, so the same every time"
        );
        assert_eq!(EtcdLease::of_grant(&a, "x").id(), ids[0]);
    }

    #[test]
    fn note_keys_never_share_a_range_with_other_names() {
        assert_ne!(note_key("p/", "a"), note_key("p/", "a/b"));
        assert!(note_key("p/", "a").starts_with(b"p/\0note/1:a/"));
    }

    #[test]
    fn values_carry_the_layout_mark() {
        let value = value(&Token::from_bytes([0xab; 16]));
        assert!(is_ours_layout(&value));
        assert_eq!(value.len(), 35);
        assert!(!is_ours_layout(b"some-other-client"));
    }
}
