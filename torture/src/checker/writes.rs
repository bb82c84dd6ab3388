//! Fenced writes, fencing tokens and the plain counter.

use std::collections::HashMap;
use std::collections::hash_map::Entry;

use super::sections::Section;
use crate::history::{Event, Record};
use crate::resource::Accepted;

/// One fenced write, as its worker recorded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Write {
    pub(super) lock: String,
    pub(super) worker: u32,
    pub(super) token: u64,
    pub(super) sent_ns: u64,
    pub(super) accepted: bool,
}

/// The fenced writes in `records`.
pub(super) fn writes(records: &[Record]) -> Vec<Write> {
    records
        .iter()
        .filter_map(|r| match r.event {
            Event::Write {
                token,
                sent_ns,
                accepted,
            } => Some(Write {
                lock: r.lock().to_owned(),
                worker: r.worker.unwrap_or(u32::MAX),
                token,
                sent_ns,
                accepted,
            }),
            _ => None,
        })
        .collect()
}

/// Entries of the fenced log that the fence should have refused: a token smaller than an
/// entry's before it on the same lock, or equal to that lock's largest one but written by
/// another worker (each lock's tokens are fenced apart).
pub(super) fn stale_in_log(log: &[Accepted]) -> usize {
    // The largest (token, writer) accepted so far, per lock.
    let mut best: HashMap<Option<&str>, (u64, u32)> = HashMap::new();
    let mut stale = 0;
    for entry in log {
        let b = best.entry(entry.lock.as_deref());
        match b {
            Entry::Occupied(b) if entry.token < b.get().0 => stale += 1,
            Entry::Occupied(b) if entry.token == b.get().0 && entry.worker != b.get().1 => {
                stale += 1;
            }
            Entry::Occupied(b) if entry.token == b.get().0 => {}
            Entry::Occupied(mut b) => {
                b.insert((entry.token, entry.worker));
            }
            Entry::Vacant(b) => {
                b.insert((entry.token, entry.worker));
            }
        }
    }
    stale
}

/// Rejected writes split by whether the writer's section had ended when it sent them:
/// `(stale, while valid)`.
pub(super) fn rejected(writes: &[Write], sections: &[Section]) -> (usize, usize) {
    let ends = section_ends(sections);
    let mut stale = 0;
    let mut valid = 0;
    for w in writes.iter().filter(|w| !w.accepted) {
        match ends.get(&(w.lock.as_str(), w.worker, w.token)) {
            Some(&end) if w.sent_ns <= end => valid += 1,
            _ => stale += 1,
        }
    }
    (stale, valid)
}

/// Writes to the resource (counter writes and fenced writes) sent after the writer's section
/// had ended: what a stalled holder does. Each one can lose an update on the plain counter.
pub(super) fn late_writes(records: &[Record], sections: &[Section]) -> usize {
    let ends = section_ends(sections);
    records
        .iter()
        .filter(|r| {
            let (token, sent) = match r.event {
                // The counter's SET is sent just before its reply: use the reply's time.
                Event::Increment { token, .. } => (token, r.at_ns),
                Event::Write { token, sent_ns, .. } => (token, sent_ns),
                _ => return false,
            };
            let worker = r.worker.unwrap_or(u32::MAX);
            ends.get(&(r.lock(), worker, token))
                .is_none_or(|&end| sent > end)
        })
        .count()
}

/// Completed read-modify-writes of the plain counter.
pub(super) fn increments(records: &[Record]) -> u64 {
    let n = records
        .iter()
        .filter(|r| matches!(r.event, Event::Increment { .. }))
        .count();
    u64::try_from(n).unwrap_or(u64::MAX)
}

/// The end of each exclusive section by lock, worker and token: only exclusive holders write,
/// a reader's token (the last write's) may repeat a writer's, and a multi-lock's names may
/// share one token.
fn section_ends(sections: &[Section]) -> HashMap<(&str, u32, u64), u64> {
    sections
        .iter()
        .filter(|s| s.held.is_exclusive())
        .map(|s| ((s.lock.as_str(), s.worker, s.token), s.end_ns))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::Held;

    fn write(worker: u32, token: u64, sent_ns: u64, accepted: bool) -> Write {
        Write {
            lock: crate::history::LOCK_NAME.to_owned(),
            worker,
            token,
            sent_ns,
            accepted,
        }
    }

    fn section(worker: u32, token: u64, start_ns: u64, end_ns: u64) -> Section {
        Section {
            lock: crate::history::LOCK_NAME.to_owned(),
            worker,
            token,
            requested_ns: start_ns - 1,
            start_ns,
            end_ns,
            held: Held::Exclusive,
        }
    }

    fn log(entries: &[(u64, u32)]) -> Vec<Accepted> {
        entries
            .iter()
            .map(|&(token, worker)| Accepted {
                token,
                worker,
                lock: None,
            })
            .collect()
    }

    #[test]
    fn the_log_must_not_go_back() {
        assert_eq!(stale_in_log(&log(&[(1, 0), (2, 1), (5, 0), (9, 2)])), 0);
        assert_eq!(stale_in_log(&log(&[(1, 0), (1, 0), (5, 1), (5, 1)])), 0);
        assert_eq!(
            stale_in_log(&log(&[(1, 0), (5, 1), (3, 0), (5, 1), (9, 2)])),
            1
        );
        assert_eq!(stale_in_log(&log(&[(5, 1), (5, 2)])), 1);
    }

    #[test]
    fn each_lock_of_the_log_is_fenced_apart() {
        let on = |lock: &str, token, worker| Accepted {
            token,
            worker,
            lock: Some(lock.into()),
        };
        // A smaller token on another name is no regression; on the same name it is.
        assert_eq!(stale_in_log(&[on("a", 9, 0), on("b", 3, 1)]), 0);
        assert_eq!(
            stale_in_log(&[on("a", 9, 0), on("b", 3, 1), on("a", 4, 2)]),
            1
        );
    }

    #[test]
    fn rejections_are_split_by_lease() {
        let sections = [section(0, 5, 10, 20)];
        let writes = [write(0, 5, 15, false), write(0, 5, 25, false)];
        assert_eq!(rejected(&writes, &sections), (1, 1));
    }
}
