//! The contender's observations: which version of each name's object this lock has seen, and
//! since when on its own monotonic clock.
//!
//! This is how a lease expires without anyone trusting a wall clock. A holder that wrote
//! version `V` sent that write at `t_send` (its own clock), and counts its validity to
//! `t_send + lease − drift`. A contender that receives `V` in a read at `t_seen` (its own
//! clock) knows `V` was written before the read was answered, so `t_send < t_seen` in real
//! time. If, a whole lease later by its own clock, it still finds `V` — the holder neither
//! renewed nor released — the holder's validity ended before `t_seen + lease`, up to the two
//! clocks' rate difference (the drift allowance). Its takeover is then a conditional write on
//! `V`, so a renewal that lands first makes it fail. Only elapsed times on each machine's own
//! monotonic clock are compared with a lease: never two machines' wall clocks, never the
//! store's `Last-Modified`.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use object_store::UpdateVersion;
use tokio::time::Instant;

/// Past this many names observed, observations older than their lease twice over are dropped
/// (a name looked at once and never again must not be kept for ever).
const PRUNE_ABOVE: usize = 1024;

/// One name's observed version.
#[derive(Debug, Clone)]
struct Seen {
    version: UpdateVersion,
    /// When the read that first returned `version` was answered.
    first: Instant,
    /// When it was last returned.
    last: Instant,
    /// The lease the object declared.
    lease: Duration,
}

/// The observations of one lock (one process's contender side).
#[derive(Debug, Default)]
pub(crate) struct Observations {
    seen: Mutex<HashMap<String, Seen>>,
}

impl Observations {
    /// Records that a read answered at `at` returned `version` of `key`, declaring `lease`,
    /// and returns how long this lock has seen that very version (zero when it is new).
    pub(crate) fn saw(
        &self,
        key: &str,
        version: &UpdateVersion,
        lease: Duration,
        at: Instant,
    ) -> Duration {
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        if seen.len() > PRUNE_ABOVE {
            seen.retain(|_, s| at.saturating_duration_since(s.last) < s.lease * 2);
        }
        match seen.get_mut(key) {
            Some(s) if s.version == *version => {
                s.last = at;
                s.lease = lease;
                at.saturating_duration_since(s.first)
            }
            _ => {
                seen.insert(
                    key.to_owned(),
                    Seen {
                        version: version.clone(),
                        first: at,
                        last: at,
                        lease,
                    },
                );
                Duration::ZERO
            }
        }
    }

    /// Forgets `key` (after a grant or a release seen: the next holder's version starts anew).
    pub(crate) fn forget(&self, key: &str) {
        self.seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(tag: &str) -> UpdateVersion {
        UpdateVersion {
            e_tag: Some(tag.to_owned()),
            version: None,
        }
    }

    #[test]
    fn the_same_version_ages_and_a_new_one_starts_over() {
        let seen = Observations::default();
        let t0 = Instant::now();
        let lease = Duration::from_secs(1);
        assert_eq!(seen.saw("k", &v("a"), lease, t0), Duration::ZERO);
        let later = t0 + Duration::from_millis(700);
        assert_eq!(
            seen.saw("k", &v("a"), lease, later),
            Duration::from_millis(700)
        );
        assert_eq!(seen.saw("k", &v("b"), lease, later), Duration::ZERO);
        seen.forget("k");
        assert_eq!(seen.saw("k", &v("b"), lease, later), Duration::ZERO);
    }
}
