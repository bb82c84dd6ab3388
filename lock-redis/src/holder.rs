//! The holder's description: who holds a lock, written by the grant itself beside the lock key
//! (`{key}:distlock-holder`, see `layout.rs`), for operators (`distlock ls`, `distlock show`).
//! The lock key's own value stays the plain token, so redis-py and node-redlock interop is
//! unchanged.

use std::time::{SystemTime, UNIX_EPOCH};

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
}
