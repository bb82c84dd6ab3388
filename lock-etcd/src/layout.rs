//! The data layout: one key per lock, holding the holder's token, attached to an etcd lease of
//! the holder's own whose id is derived from the token ([`EtcdLease`]); and the key spaces beside the lock keys
//! (semaphore holders, fair queues, readers, waiting writers, fences, notes, grant times), the
//! one place that knows them: the grants write them, and the inspector (`inspect/`) reads them.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use etcd_client::{PutOptions, TxnOp};
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
/// prefix (`\0sem/`, `\0fair/`, `\0rwr/`, `\0rww/`, `\0rwf/`, `\0note/`, `\0acc/`, `\0at/`): a lock of such a
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

/// The token (32 hex digits) in a holder's value, `None` for a value distlock never writes.
pub(crate) fn token_hex(value: &[u8]) -> Option<&str> {
    std::str::from_utf8(value.strip_prefix(VALUE_PREFIX.as_bytes())?).ok()
}

/// Whether a stored value was written by distlock (whose holders announce their release).
pub(crate) fn is_ours_layout(value: &[u8]) -> bool {
    value.starts_with(VALUE_PREFIX.as_bytes())
}

/// An etcd lease, by its id: etcd's own expiring grant, which every key put on it goes with.
/// Not distlock's [`Lease`] (a granted lock), though each distlock lease is carried by one: the
/// grant's keys sit on the etcd lease of [`EtcdLease::of_grant`] (or on a lease shared with
/// other grants: `shared_lease.rs`, `fixed_lease.rs`), and a renewal keeps that etcd lease
/// alive.
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

/// The space of grant times: per holder, when its grant was made (`granted_key`).
pub(crate) const GRANTED: &[u8] = b"\0at/";

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

/// The grant-time key of the holder `token` of `name`: its value is the Unix time of the
/// grant in milliseconds (the granter's clock, decimal), put in the grant's own transaction on
/// the grant's etcd lease, so it lives exactly as long as the grant. Keyed by token, it never
/// describes another grant; a key of its own (rather than a longer lock value) leaves every
/// compare on the holder's value, and every older reader of the layout, as they were.
pub(crate) fn granted_key(prefix: &str, name: &str, token_hex: &str) -> Vec<u8> {
    let mut key = under(GRANTED, prefix, name);
    key.extend_from_slice(token_hex.as_bytes());
    key
}

/// `Put(granted_key, now)` on `etcd_lease` (an id): the grant time of `token`'s grant of
/// `name`, sent with the grant itself.
pub(crate) fn stamp(prefix: &str, name: &str, token: &Token, etcd_lease: i64) -> TxnOp {
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    TxnOp::put(
        granted_key(prefix, name, token.to_hex().as_str()),
        now_ms.to_string(),
        Some(PutOptions::new().with_lease(etcd_lease)),
    )
}

/// `Delete(granted_key)` of `token`'s grant of `name`: sent with the grant's release.
pub(crate) fn unstamp(prefix: &str, name: &str, token: &Token) -> TxnOp {
    TxnOp::delete(granted_key(prefix, name, token.to_hex().as_str()), None)
}

/// The term of the distlock holder `holder` (the lock key of `name` as read): the fencing
/// token its grant (or the hand-over that made it) returned. That is the `create_revision` of
/// its grant-time key when `stamps` (the grant-time keys of `name`, as read) has it: the grant
/// put it, and a move to a lease of its own (`moving.rs`) puts the lock key again, at a later
/// `mod_revision`, but leaves the grant time's `create_revision` as it was. Else (a multi-lock
/// grant writes no grant time) the lock key's `mod_revision`. 0 for a value distlock never
/// writes.
pub(crate) fn term(
    prefix: &str,
    name: &str,
    holder: &etcd_client::KeyValue,
    stamps: &[etcd_client::KeyValue],
) -> u64 {
    let Some(hex) = token_hex(holder.value()) else {
        return 0;
    };
    let stamp = granted_key(prefix, name, hex);
    let revision = stamps
        .iter()
        .find(|kv| kv.key() == stamp.as_slice())
        .map_or(
            holder.mod_revision(),
            etcd_client::KeyValue::create_revision,
        );
    u64::try_from(revision).unwrap_or(0)
}

/// The grant time a grant-time key's value says.
pub(crate) fn granted_at(value: &[u8]) -> Option<SystemTime> {
    let ms: u64 = std::str::from_utf8(value).ok()?.parse().ok()?;
    UNIX_EPOCH.checked_add(Duration::from_millis(ms))
}

/// The kinds of keys beside the lock keys, by their space.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Space {
    /// A semaphore holder ([`SEMAPHORE`]).
    Semaphore,
    /// A fair waiter's queue entry ([`FAIR`]).
    Fair,
    /// A reader ([`READERS`]).
    Reader,
    /// A writer's waiting record ([`WAITING`]).
    Waiting,
    /// The read-write fence key ([`FENCE`]).
    Fence,
    /// The holder's note ([`NOTE`]).
    Note,
    /// A holder's grant time ([`GRANTED`]).
    Granted,
}

/// The marks after the prefix, and their spaces (the fence records of [`ACCEPTED`] belong to
/// resources, not to lock names: left out).
const SPACES: &[(&[u8], Space)] = &[
    (SEMAPHORE, Space::Semaphore),
    (FAIR, Space::Fair),
    (READERS, Space::Reader),
    (WAITING, Space::Waiting),
    (FENCE, Space::Fence),
    (NOTE, Space::Note),
    (GRANTED, Space::Granted),
];

/// What one key under the prefix is.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Parsed<'k> {
    /// The lock key of the name.
    Lock(&'k str),
    /// A key of the name in a space; `rest` is what follows the name's `/` (a token in hex,
    /// or nothing).
    Derived {
        space: Space,
        name: &'k str,
        rest: &'k [u8],
    },
}

impl<'k> Parsed<'k> {
    /// The lock name the key belongs to.
    pub(crate) fn name(&self) -> &'k str {
        match self {
            Self::Lock(name) | Self::Derived { name, .. } => name,
        }
    }
}

/// What `key` (under `prefix`) is; `None` for a key outside the prefix, not UTF-8, or in a
/// space no lock name owns.
pub(crate) fn parse<'k>(prefix: &str, key: &'k [u8]) -> Option<Parsed<'k>> {
    let rest = key.strip_prefix(prefix.as_bytes())?;
    if !rest.starts_with(b"\0") {
        return std::str::from_utf8(rest).ok().map(Parsed::Lock);
    }
    let (space, rest) = SPACES
        .iter()
        .find_map(|(mark, space)| rest.strip_prefix(*mark).map(|r| (*space, r)))?;
    let colon = rest.iter().position(|b| *b == b':')?;
    let len: usize = std::str::from_utf8(&rest[..colon]).ok()?.parse().ok()?;
    let name = rest.get(colon + 1..colon + 1 + len)?;
    if rest.get(colon + 1 + len) != Some(&b'/') {
        return None;
    }
    Some(Parsed::Derived {
        space,
        name: std::str::from_utf8(name).ok()?,
        rest: rest.get(colon + 2 + len..)?,
    })
}

/// The permits and `max` a semaphore holder's value says, after its token's value.
pub(crate) fn holder_parts(stored: &[u8]) -> Option<(&[u8], u64, u64)> {
    let text = std::str::from_utf8(stored).ok()?;
    let mut parts = text.split(' ');
    let token = parts.next()?;
    let permits = parts.next()?.parse().ok()?;
    let max = parts.next()?.parse().ok()?;
    Some((token.as_bytes(), permits, max))
}

/// The end of the range of every key that starts with `prefix` (etcd's rule: its last byte
/// below 0xff incremented, what follows dropped; `[0]`, "to the end", when there is none).
pub(crate) fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
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
    fn keys_name_their_lock_and_space() {
        assert_eq!(parse("p/", b"p/job:1"), Some(Parsed::Lock("job:1")));
        let token = Token::from_bytes([5; 16]);
        let reader = reader_key("p/", "a/b", &token);
        let parsed = parse("p/", &reader).expect("a reader");
        assert_eq!(parsed.name(), "a/b");
        assert!(matches!(
            parsed,
            Parsed::Derived { space: Space::Reader, rest, .. } if rest == token.to_hex().as_str().as_bytes()
        ));
        assert!(matches!(
            parse("p/", &note_key("p/", "x")),
            Some(Parsed::Derived {
                space: Space::Note,
                name: "x",
                rest: b""
            })
        ));
        assert_eq!(parse("p/", b"p/\0sem/9:x/"), None, "a length past the end");
        assert_eq!(parse("p/", b"p/\0zzz/1:x/"), None, "an unknown space");
        assert_eq!(parse("p/", b"p/\0acc/1:x/"), None, "a resource's record");
        assert_eq!(parse("p/", b"q/x"), None);
        assert_eq!(prefix_end(b"distlock/"), b"distlock0".to_vec());
        assert_eq!(prefix_end(b"a\xff"), b"b".to_vec());
        assert_eq!(prefix_end(b""), vec![0]);
    }

    #[test]
    fn grant_times_and_holder_values_read_back() {
        let token = Token::from_bytes([6; 16]);
        let key = granted_key("p/", "x", token.to_hex().as_str());
        assert!(matches!(
            parse("p/", &key),
            Some(Parsed::Derived {
                space: Space::Granted,
                name: "x",
                ..
            })
        ));
        assert_eq!(name_of(b"p/", &key), None, "no waiter wakes on it");
        assert_eq!(
            granted_at(b"1700000000000"),
            UNIX_EPOCH.checked_add(Duration::from_secs(1_700_000_000))
        );
        assert_eq!(granted_at(b"soon"), None);
        let stored = holder_value(&token, 2, 5);
        let (value_part, permits, max) = holder_parts(&stored).expect("a holder");
        assert_eq!((value_part, permits, max), (&value(&token)[..], 2, 5));
        assert_eq!(holder_parts(b"dl:ab"), None);
    }

    #[test]
    fn values_carry_the_layout_mark() {
        let value = value(&Token::from_bytes([0xab; 16]));
        assert!(is_ours_layout(&value));
        assert_eq!(value.len(), 35);
        assert!(!is_ours_layout(b"some-other-client"));
    }
}
