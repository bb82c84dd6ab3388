//! Holder descriptions, written and read. One description per grant: the note beside the lock
//! key (`{key}:distlock-note`, see `layout.rs`: the grant's token, its fencing token, the note),
//! which [`Lock::annotate`](lock_core::backend::Lock::annotate) writes, and which a grant
//! writes itself with [holder metadata](crate::RedisLockBuilder::holder_metadata) (host, pid,
//! note, since: [`Describe`]). One reader, [`HolderReplies::holder`], for
//! [`Lock::describe_holder`](lock_core::backend::Lock::describe_holder) and for operators'
//! tools (`distlock ls`, `distlock show`), always as a [`Holder`]. The lock key's own value
//! stays the plain token, so redis-py and node-redlock interop is unchanged.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use lock_core::backend::Holder;

use crate::layout::TOKEN_PREFIX;

/// What a `RedisLock` built with
/// [`holder_metadata`](crate::RedisLockBuilder::holder_metadata) says about its holders: the
/// part of the JSON that is the same for every grant (host, process id, note), made once.
#[derive(Debug, Clone)]
pub(crate) struct Describe {
    /// `{"host":…,"pid":…,"note":…` — the per-grant fields and the closing brace follow.
    prefix: String,
}

impl Describe {
    /// This process on this host, with the user's `note` (or `null`).
    pub(crate) fn here(note: Option<&str>) -> Self {
        let quoted = |s: &str| serde_json::to_string(s).unwrap_or_else(|_| "null".to_owned());
        let prefix = format!(
            "{{\"host\":{},\"pid\":{},\"note\":{}",
            quoted(&hostname()),
            std::process::id(),
            note.map_or_else(|| "null".to_owned(), quoted)
        );
        Self { prefix }
    }

    /// The description of the holder of `token_value` (the plain `dl:` + hex value), granted
    /// now: `since_ms` is this client's wall clock in Unix milliseconds at the attempt.
    pub(crate) fn of(&self, token_value: &str) -> String {
        let since_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        // The token is `dl:` and hex digits: nothing to escape.
        format!(
            "{},\"token\":\"{token_value}\",\"since_ms\":{since_ms}}}",
            self.prefix
        )
    }
}

/// The replies a holder is read from, each as the store gave it: the lock key's value and
/// PTTL, and the values of its note key and its fencing counter ([`LockKeys`](crate::LockKeys)
/// `note` and `fence`). Read them in one step (a script or a pipeline), so that they belong
/// together.
#[derive(Debug, Clone, Copy, Default)]
pub struct HolderReplies<'a> {
    /// The lock key's value (`GET`), the holder's token; `None` when the key is absent.
    pub value: Option<&'a [u8]>,
    /// The lock key's `PTTL` in milliseconds (-1: no expiry).
    pub pttl_ms: i64,
    /// The note key's value (`GET`): token, `\n`, fencing token, `\n`, note.
    pub note: Option<&'a [u8]>,
    /// The fencing counter's value (`GET`): the last fencing token issued for the name.
    pub fence: Option<&'a [u8]>,
}

impl HolderReplies<'_> {
    /// The holder these replies describe, `None` when nobody holds the lock. Its note is the
    /// one written beside its own grant (a note left by an earlier grant, another token, is
    /// not shown). Its fencing token is the one its note carries; else, for a distlock holder
    /// (a `dl:` token), the fencing counter's (a fenced grant sets the counter in the same
    /// script that sets the key, so the last token issued is the holder's); else 0, like any
    /// other client's holder (redis-py, node-redlock).
    #[must_use]
    pub fn holder(&self) -> Option<Holder> {
        let value = self.value?;
        // PTTL -1: the key never expires (not written by distlock).
        let ttl = u64::try_from(self.pttl_ms).ok().map(Duration::from_millis);
        let own = self.note.and_then(|note| own_note(note, value));
        // A counter that is not a number (someone else's key) tells no term: 0.
        let counter = || {
            self.fence
                .and_then(|f| std::str::from_utf8(f).ok()?.parse().ok())
                .filter(|_| value.starts_with(TOKEN_PREFIX.as_bytes()))
                .unwrap_or(0)
        };
        let fencing_token = own.map_or_else(counter, |(fence, _)| fence);
        let holder = Holder::new(fencing_token, ttl);
        Some(match own {
            Some((_, note)) => holder.with_note(note),
            None => holder,
        })
    }
}

/// The fencing token and the note of `note` (token `\n` fencing token `\n` note) when it was
/// written beside the grant of `token`. Tokens and fencing tokens never hold a newline.
fn own_note<'a>(note: &'a [u8], token: &[u8]) -> Option<(u64, &'a [u8])> {
    let mut parts = note.splitn(3, |&b| b == b'\n');
    let (written_for, fence, text) = (parts.next()?, parts.next()?, parts.next()?);
    if written_for != token {
        return None;
    }
    // A fencing token that is not a number tells no term: 0, as the counter's would.
    let fence = std::str::from_utf8(fence).ok()?.parse().unwrap_or(0);
    Some((fence, text))
}

/// The host's name as the kernel knows it (`/proc/sys/kernel/hostname`), else `HOSTNAME`, else
/// `unknown`: std has no portable call for it, and it is read once per `RedisLock`.
fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_description_is_json_with_every_field() {
        let described = Describe::here(Some("job \"nightly\"\n")).of("dl:00ff");
        let value: serde_json::Value = serde_json::from_str(&described).expect("valid JSON");
        assert_eq!(value["token"], "dl:00ff");
        assert_eq!(value["note"], "job \"nightly\"\n");
        assert_eq!(value["pid"], u64::from(std::process::id()));
        assert!(value["host"].as_str().is_some_and(|h| !h.is_empty()));
        assert!(
            value["since_ms"]
                .as_u64()
                .is_some_and(|ms| ms > 1_700_000_000_000)
        );
        let plain = Describe::here(None).of("dl:01");
        let value: serde_json::Value = serde_json::from_str(&plain).expect("valid JSON");
        assert!(value["note"].is_null());
    }

    const TOKEN: &[u8] = b"dl:00ff";

    fn read(note: Option<&[u8]>, fence: Option<&[u8]>) -> Option<Holder> {
        HolderReplies {
            value: Some(TOKEN),
            pttl_ms: 5_000,
            note,
            fence,
        }
        .holder()
    }

    #[test]
    fn the_holders_own_note_is_its_description() {
        let ttl = Some(Duration::from_secs(5));
        assert_eq!(
            read(Some(b"dl:00ff\n7\npod-a\nline two"), Some(b"9")),
            Some(Holder::new(7, ttl).with_note(&b"pod-a\nline two"[..]))
        );
        // An earlier grant's note (another token) is not this holder's: the counter's term.
        assert_eq!(
            read(Some(b"dl:0011\n3\npod-b"), Some(b"9")),
            Some(Holder::new(9, ttl))
        );
        assert_eq!(read(None, None), Some(Holder::new(0, ttl)));
        let nobody = HolderReplies {
            note: Some(b"dl:00ff\n7\npod-a"),
            ..HolderReplies::default()
        };
        assert_eq!(nobody.holder(), None);
    }

    #[test]
    fn a_foreign_holder_has_no_term_and_no_expiry_shows_as_none() {
        let foreign = HolderReplies {
            value: Some(b"3f2a"),
            pttl_ms: -1,
            fence: Some(b"9"),
            ..HolderReplies::default()
        };
        assert_eq!(foreign.holder(), Some(Holder::new(0, None)));
    }
}
