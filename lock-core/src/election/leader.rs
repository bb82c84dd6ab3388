//! What observers read back: the leader's term from the holder's fencing token, its value and
//! since when it leads from the record it wrote beside the lock.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::LockError;
use crate::backend::{Holder, Lock};

/// The first word of a leader's record.
const MAGIC: &str = "distlock-leader/1";

/// A leader just granted writes its record right after: a reader that finds none yet looks
/// again this many times, this far apart, before it reports the leader without one.
const RECORD_RETRIES: u32 = 5;
const RECORD_RETRY_AFTER: Duration = Duration::from_millis(20);

/// The current leader of an election, as the store described it ([`Election::leader`],
/// [`Election::observe`]).
///
/// [`Election::leader`]: super::Election::leader
/// [`Election::observe`]: super::Election::observe
#[derive(Clone, PartialEq, Eq)]
pub struct Leader {
    term: u64,
    value: Arc<[u8]>,
    since: Option<SystemTime>,
    recorded: bool,
}

impl Leader {
    /// The leader's term: the fencing token of its grant. Larger for every later leader.
    #[must_use]
    pub fn term(&self) -> u64 {
        self.term
    }

    /// The value the leader campaigned with ([`Election::value`](super::Election::value));
    /// empty when it gave none, or when it wrote no record (see [`Leader::is_recorded`]).
    #[must_use]
    pub fn value(&self) -> &[u8] {
        &self.value
    }

    /// The value as text, if it is UTF-8.
    #[must_use]
    pub fn value_str(&self) -> Option<&str> {
        std::str::from_utf8(&self.value).ok()
    }

    /// When the leader was elected, by its own wall clock; `None` without a record.
    #[must_use]
    pub fn since(&self) -> Option<SystemTime> {
        self.since
    }

    /// Whether the leader wrote its record (value and time). A holder without one took the
    /// lock without campaigning (a plain `locker.lock(name)`), or was granted a moment ago
    /// and died before writing it.
    #[must_use]
    pub fn is_recorded(&self) -> bool {
        self.recorded
    }

    /// The leader `holder` describes, if its note is a leader's record (what
    /// [`Election::campaign`](super::Election::campaign) writes: value and since); `None` for
    /// a holder without a note or with another note (a plain lock's). For operators' tools
    /// that list every held lock ([`Lock::describe_holder`] of each) and show the elections
    /// among them, as `distlock ls` and `distlock serve` do.
    #[must_use]
    pub fn from_record(holder: &Holder) -> Option<Self> {
        let leader = from_holder(holder);
        leader.since.is_some().then_some(leader)
    }
}

impl fmt::Debug for Leader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Leader")
            .field("term", &self.term)
            .field("value", &String::from_utf8_lossy(&self.value))
            .field("since", &self.since)
            .field("recorded", &self.recorded)
            .finish()
    }
}

/// The record a leader writes beside the lock: `distlock-leader/1 <since, ms since the Unix
/// epoch>\n<value>`.
pub(super) fn record(since: SystemTime, value: &[u8]) -> Vec<u8> {
    let millis = since
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis();
    let mut record = format!("{MAGIC} {millis}\n").into_bytes();
    record.extend_from_slice(value);
    record
}

/// The leader a holder description shows. A note that is not a leader's record is taken as
/// the value itself, without a time.
pub(super) fn from_holder(holder: &Holder) -> Leader {
    let Some(note) = &holder.note else {
        return Leader {
            term: holder.fencing_token,
            value: Arc::from(&b""[..]),
            since: None,
            recorded: false,
        };
    };
    let parsed = note.iter().position(|&b| b == b'\n').and_then(|end| {
        let head = std::str::from_utf8(&note[..end]).ok()?;
        let millis: u64 = head.strip_prefix(MAGIC)?.trim().parse().ok()?;
        Some((UNIX_EPOCH + Duration::from_millis(millis), &note[end + 1..]))
    });
    let (since, value) = match parsed {
        Some((since, value)) => (Some(since), Arc::from(value)),
        None => (None, Arc::clone(note)),
    };
    Leader {
        term: holder.fencing_token,
        value,
        since,
        recorded: true,
    }
}

/// Reads the holder of `name`, looking again shortly when a leader has no record yet.
pub(super) async fn read_holder(lock: &dyn Lock, name: &str) -> Result<Option<Holder>, LockError> {
    let mut holder = lock.describe_holder(name).await?;
    for _ in 0..RECORD_RETRIES {
        match &holder {
            Some(h) if h.note.is_none() => {
                tokio::time::sleep(RECORD_RETRY_AFTER).await;
                let again = lock.describe_holder(name).await?;
                // Another grant meanwhile: report that one (looked at afresh).
                holder = again;
            }
            _ => break,
        }
    }
    Ok(holder)
}

/// The current leader of `name`.
pub(super) async fn read(lock: &dyn Lock, name: &str) -> Result<Option<Leader>, LockError> {
    Ok(read_holder(lock, name).await?.as_ref().map(from_holder))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_reads_back_and_a_foreign_note_is_the_value() {
        let since = UNIX_EPOCH + Duration::from_millis(1_700_000_000_123);
        let holder = Holder::new(7, None).with_note(record(since, b"pod-a\nline two"));
        let leader = from_holder(&holder);
        assert_eq!(leader.term(), 7);
        assert_eq!(leader.value(), b"pod-a\nline two");
        assert_eq!(leader.since(), Some(since));
        assert!(leader.is_recorded());
        let foreign = from_holder(&Holder::new(8, None).with_note(&b"hello"[..]));
        assert_eq!((foreign.value(), foreign.since()), (&b"hello"[..], None));
        let bare = from_holder(&Holder::new(9, None));
        assert!(!bare.is_recorded() && bare.value().is_empty());
        assert_eq!(Leader::from_record(&holder).map(|l| l.term()), Some(7));
        assert!(Leader::from_record(&Holder::new(8, None).with_note(&b"hello"[..])).is_none());
        assert!(Leader::from_record(&Holder::new(9, None)).is_none());
    }
}
