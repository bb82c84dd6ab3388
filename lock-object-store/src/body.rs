//! The lock object's body: one small JSON document per name.
//!
//! JSON because `serde_json` is in the tree already and a person reading the bucket can tell
//! what the object is; short keys because every renewal writes it again. `v` is the format's
//! version, so a later format can be told apart (and an older client refuses it rather than
//! overwriting it).

use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Serialize};

/// The format version this crate writes and reads.
pub(crate) const FORMAT: u32 = 1;

/// What one lock object holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Body {
    /// The format version ([`FORMAT`]).
    #[serde(rename = "v")]
    pub(crate) format: u32,
    /// The fencing epoch: the last grant's number, +1 on every grant, kept across releases.
    #[serde(rename = "e")]
    pub(crate) epoch: u64,
    /// The holder's token (hex), `None` once released.
    #[serde(rename = "h", default, skip_serializing_if = "Option::is_none")]
    pub(crate) holder: Option<String>,
    /// The lease the holder asked for, in milliseconds: how long a contender must see this
    /// very version unchanged before it may take over.
    #[serde(rename = "l")]
    pub(crate) lease_ms: u64,
    /// Writes of this object so far. Every write changes it, so every write changes the
    /// bytes: an S3 ETag is the MD5 of the bytes, and a renewal that wrote the same bytes
    /// again would keep the version a contender is timing.
    #[serde(rename = "w")]
    pub(crate) writes: u64,
    /// The holder's description ([`Lock::annotate`](lock_core::backend::Lock::annotate)),
    /// base64; it belongs to the grant, so a new grant starts without one.
    #[serde(rename = "n", default, skip_serializing_if = "Option::is_none")]
    pub(crate) note: Option<String>,
    /// When the holder was granted the lock, by its own wall clock (Unix ms): what an
    /// inspection shows as "held since". Written with the grant (no extra request), kept by
    /// renewals and notes, dropped on release.
    #[serde(rename = "s", default, skip_serializing_if = "Option::is_none")]
    pub(crate) since_ms: Option<u64>,
}

/// The wall clock now, in Unix milliseconds.
fn now_ms() -> Option<u64> {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()
        .and_then(|d| u64::try_from(d.as_millis()).ok())
}

/// Why an object's bytes are not a lock body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NotABody(pub(crate) String);

impl Body {
    /// The first grant of a name.
    pub(crate) fn first(holder: &str, lease: Duration) -> Self {
        Self {
            format: FORMAT,
            epoch: 1,
            holder: Some(holder.to_owned()),
            lease_ms: millis(lease),
            writes: 1,
            note: None,
            since_ms: now_ms(),
        }
    }

    /// The next write after this one: a new grant to `holder` (epoch + 1, no note).
    pub(crate) fn granted(&self, holder: &str, lease: Duration) -> Self {
        Self {
            format: FORMAT,
            epoch: self.epoch.saturating_add(1),
            holder: Some(holder.to_owned()),
            lease_ms: millis(lease),
            writes: self.writes.wrapping_add(1),
            note: None,
            since_ms: now_ms(),
        }
    }

    /// The same grant renewed for `lease`.
    pub(crate) fn renewed(&self, lease: Duration) -> Self {
        Self {
            lease_ms: millis(lease),
            writes: self.writes.wrapping_add(1),
            ..self.clone()
        }
    }

    /// The same grant with `note` beside it.
    pub(crate) fn annotated(&self, note: &[u8]) -> Self {
        Self {
            note: Some(STANDARD.encode(note)),
            writes: self.writes.wrapping_add(1),
            ..self.clone()
        }
    }

    /// Released: no holder, the epoch kept (the next grant's is larger).
    pub(crate) fn released(&self) -> Self {
        Self {
            holder: None,
            note: None,
            since_ms: None,
            writes: self.writes.wrapping_add(1),
            ..self.clone()
        }
    }

    /// When the holder was granted the lock (its own wall clock), if it said.
    pub(crate) fn since(&self) -> Option<std::time::SystemTime> {
        self.since_ms
            .map(|ms| std::time::UNIX_EPOCH + Duration::from_millis(ms))
    }

    /// The lease as a duration.
    pub(crate) fn lease(&self) -> Duration {
        Duration::from_millis(self.lease_ms)
    }

    /// Whether `token` (hex) holds this object.
    pub(crate) fn held_by(&self, token: &str) -> bool {
        self.holder.as_deref() == Some(token)
    }

    /// The note's bytes, if any (a note that is not base64 counts as none).
    pub(crate) fn note_bytes(&self) -> Option<Vec<u8>> {
        self.note.as_ref().and_then(|n| STANDARD.decode(n).ok())
    }

    /// The bytes written to the store.
    pub(crate) fn encode(&self) -> Vec<u8> {
        // A struct of numbers and strings always serializes.
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// Reads a body, refusing anything else (another program's object at the name, a newer
    /// format).
    pub(crate) fn decode(bytes: &[u8]) -> Result<Self, NotABody> {
        let body: Self = serde_json::from_slice(bytes).map_err(|e| {
            NotABody(format!(
                "not a distlock lock object ({} bytes): {e}",
                bytes.len()
            ))
        })?;
        if body.format != FORMAT {
            return Err(NotABody(format!(
                "a distlock lock object of format {}, this client reads format {FORMAT}",
                body.format
            )));
        }
        Ok(body)
    }
}

/// A duration in whole milliseconds, saturating.
fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_write_changes_the_bytes() {
        let first = Body::first("aa", Duration::from_secs(1));
        let renewed = first.renewed(Duration::from_secs(1));
        let released = renewed.released();
        let again = released.granted("bb", Duration::from_secs(1));
        let all = [&first, &renewed, &released, &again].map(|b| b.encode());
        for (i, a) in all.iter().enumerate() {
            assert!(!all[..i].contains(a), "write {i} repeats earlier bytes");
        }
        assert_eq!(released.epoch, 1, "a release keeps the epoch");
        assert_eq!(again.epoch, 2, "a grant raises it");
        assert_eq!(Body::decode(&again.encode()), Ok(again));
    }

    #[test]
    fn other_objects_are_not_bodies() {
        for bytes in [&b"hello"[..], b"{}", br#"{"v":1}"#, br#"{"a":1}"#] {
            assert!(Body::decode(bytes).is_err(), "{bytes:?}");
        }
        let mut newer = Body::first("aa", Duration::from_secs(1));
        newer.format = 2;
        assert!(Body::decode(&newer.encode()).is_err());
    }

    #[test]
    fn notes_round_trip() {
        let body = Body::first("aa", Duration::from_secs(1)).annotated(b"\x00leader");
        assert_eq!(body.note_bytes().as_deref(), Some(&b"\x00leader"[..]));
        assert_eq!(body.granted("bb", Duration::from_secs(1)).note, None);
    }
}
