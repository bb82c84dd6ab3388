//! The record a Redlock writes on each node as that node's note ([`Lock::annotate`] of the
//! node, through `crate::kinds::note`): a header that names the Redlock grant, then the
//! caller's note.
//!
//! ```text
//! distlock-redlock/1 <grant id: 32 hex digits> <the Redlock lease's fencing token>\n<note>
//! ```
//!
//! The grant id is the first 16 bytes of SHA-256 of the lease's token: the same on every node
//! the grant holds (one token on all N), different for every other grant (tokens are 128
//! random bits), and it does not show the token itself, which proves ownership and which a
//! holder description never carries. The fencing token is the Redlock lease's (the largest the
//! granting nodes issued), which no single node knows: it is what observers report as the term.
//!
//! A node shows a note only with the grant it was written beside (the node's own rule: the
//! note record carries the node's token), so a record read from a node names a grant that
//! holds that node at that moment.
//!
//! [`Lock::annotate`]: lock_core::backend::Lock::annotate

use std::fmt::Write as _;

use lock_core::{Lease, LockError};
use sha2::{Digest as _, Sha256};

/// The first word of every record.
const MAGIC: &str = "distlock-redlock/1";

/// The bytes a record's header may take, kept free of the nodes' note limit: the header is at
/// most 73 bytes today (magic, 32 hex digits, a `u64`, separators); the rest is room for a
/// later version's header.
const HEADER_ROOM: usize = 128;

/// The longest note a [`Redlock`](crate::Redlock) writes, in bytes: the nodes' limit
/// ([`lock_core::MAX_NOTE_BYTES`], 64 KiB) less 128 bytes for the header that names the grant
/// on each node. A longer note is refused with [`LockError::InvalidInput`], nothing sent.
pub const MAX_NOTE_BYTES: usize = lock_core::MAX_NOTE_BYTES - HEADER_ROOM;

/// What names one Redlock grant in its notes: the digest of its token and its fencing token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct GrantId {
    digest: [u8; 16],
    /// The Redlock lease's fencing token (the term observers report).
    pub(crate) fence: u64,
}

impl GrantId {
    /// The id of the grant `lease` holds.
    pub(crate) fn of(lease: &Lease) -> Self {
        let hash = Sha256::digest(lease.token().as_bytes());
        let mut digest = [0; 16];
        digest.copy_from_slice(&hash[..16]);
        Self {
            digest,
            fence: lease.fencing_token(),
        }
    }
}

/// Refuses a note longer than [`MAX_NOTE_BYTES`].
pub(crate) fn check(note: &[u8]) -> Result<(), LockError> {
    if note.len() > MAX_NOTE_BYTES {
        return Err(LockError::invalid(format!(
            "the note is {} bytes; a Redlock keeps at most {MAX_NOTE_BYTES} (the nodes' limit \
             less room for the header that names the grant)",
            note.len()
        )));
    }
    Ok(())
}

/// The record of `note` written beside the grant of `lease`.
pub(crate) fn seal(lease: &Lease, note: &[u8]) -> Vec<u8> {
    let id = GrantId::of(lease);
    let mut header = String::with_capacity(HEADER_ROOM);
    header.push_str(MAGIC);
    header.push(' ');
    for byte in id.digest {
        // Writing to a String cannot fail.
        let _ = write!(header, "{byte:02x}");
    }
    let _ = writeln!(header, " {}", id.fence);
    let mut record = header.into_bytes();
    record.extend_from_slice(note);
    record
}

/// The grant and the note of a record, `None` when `record` is not one (another client's note
/// on the node, or none of ours).
pub(crate) fn open(record: &[u8]) -> Option<(GrantId, &[u8])> {
    let end = record.iter().position(|&b| b == b'\n')?;
    let header = std::str::from_utf8(&record[..end]).ok()?;
    let mut words = header.split(' ');
    if words.next()? != MAGIC {
        return None;
    }
    let (hex, fence) = (words.next()?, words.next()?);
    if words.next().is_some() || hex.len() != 32 {
        return None;
    }
    let mut digest = [0; 16];
    for (i, byte) in digest.iter_mut().enumerate() {
        *byte = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    let fence = fence.parse().ok()?;
    Some((GrantId { digest, fence }, &record[end + 1..]))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use lock_core::Token;
    use tokio::time::Instant;

    use super::*;

    fn lease(token: Token, fence: u64) -> Lease {
        Lease::new("job", token, fence, Instant::now() + Duration::from_secs(1))
    }

    #[test]
    fn a_record_names_its_grant_and_reads_back() {
        let token = Token::generate().expect("rng");
        let ours = lease(token, 1_700_000_000_000_123);
        let record = seal(&ours, b"pod-a\nline two");
        assert!(record.len() <= HEADER_ROOM + 14);
        let (id, note) = open(&record).expect("a record");
        assert_eq!(id, GrantId::of(&ours));
        assert_eq!(id.fence, 1_700_000_000_000_123);
        assert_eq!(note, b"pod-a\nline two");
        // The token itself is nowhere in it.
        let hex = token.to_hex();
        assert!(!record.windows(32).any(|w| w == hex.as_bytes()));
        // Another grant (another token, or the same token with another fence) differs.
        let other = lease(Token::generate().expect("rng"), 1_700_000_000_000_123);
        assert_ne!(GrantId::of(&other), id);
        assert_ne!(GrantId::of(&lease(token, 7)), id);
        // An empty note is a note.
        let sealed = seal(&ours, b"");
        let (_, empty) = open(&sealed).expect("a record");
        assert!(empty.is_empty());
    }

    #[test]
    fn the_longest_header_fits_its_room() {
        let record = seal(&lease(Token::generate().expect("rng"), u64::MAX), b"");
        assert!(record.len() <= HEADER_ROOM, "{}", record.len());
        assert!(open(&record).is_some());
    }

    #[test]
    fn other_notes_are_not_records() {
        for note in [
            &b""[..],
            b"pod-a",
            b"distlock-leader/1 1700000000000\npod-a",
            b"distlock-redlock/1 00\n",
            b"distlock-redlock/1 0123456789abcdef0123456789abcdef\n",
            b"distlock-redlock/1 0123456789abcdef0123456789abcdeg 7\n",
            b"distlock-redlock/1 0123456789abcdef0123456789abcdef x\n",
            b"distlock-redlock/1 0123456789abcdef0123456789abcdef 7 8\n",
            b"distlock-redlock/2 0123456789abcdef0123456789abcdef 7\n",
            b"distlock-redlock/1 0123456789abcdef0123456789abcdef 7",
        ] {
            assert!(open(note).is_none(), "{:?}", String::from_utf8_lossy(note));
        }
        assert!(open(b"distlock-redlock/1 0123456789abcdef0123456789abcdef 7\n").is_some());
    }

    #[test]
    fn notes_are_bounded_below_the_nodes_limit() {
        assert!(check(&vec![0; MAX_NOTE_BYTES]).is_ok());
        assert!(matches!(
            check(&vec![0; MAX_NOTE_BYTES + 1]),
            Err(LockError::InvalidInput { .. })
        ));
        let record = seal(
            &lease(Token::generate().expect("rng"), u64::MAX),
            &vec![0; MAX_NOTE_BYTES],
        );
        assert!(lock_core::check_note(&record).is_ok());
    }
}
