//! Fenced writes, fencing tokens and the plain counter.

use std::collections::HashMap;

use super::sections::Section;
use crate::history::{Event, Record};
use crate::resource::Accepted;

/// One fenced write, as its worker recorded it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Write {
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
/// entry's before it, or equal to the largest one but written by another worker.
pub(super) fn stale_in_log(log: &[Accepted]) -> usize {
    let mut best: Option<Accepted> = None;
    let mut stale = 0;
    for &entry in log {
        match best {
            Some(b) if entry.token < b.token => stale += 1,
            Some(b) if entry.token == b.token && entry.worker != b.worker => stale += 1,
            Some(b) if entry.token == b.token => {}
            _ => best = Some(entry),
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
        match ends.get(&(w.worker, w.token)) {
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
            ends.get(&(worker, token)).is_none_or(|&end| sent > end)
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

/// The end of each exclusive section by worker and token: only exclusive holders write, and a
/// reader's token (the last write's) may repeat a writer's.
fn section_ends(sections: &[Section]) -> HashMap<(u32, u64), u64> {
    sections
        .iter()
        .filter(|s| s.held.is_exclusive())
        .map(|s| ((s.worker, s.token), s.end_ns))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::Held;

    fn write(worker: u32, token: u64, sent_ns: u64, accepted: bool) -> Write {
        Write {
            worker,
            token,
            sent_ns,
            accepted,
        }
    }

    fn section(worker: u32, token: u64, start_ns: u64, end_ns: u64) -> Section {
        Section {
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
            .map(|&(token, worker)| Accepted { token, worker })
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
    fn rejections_are_split_by_lease() {
        let sections = [section(0, 5, 10, 20)];
        let writes = [write(0, 5, 15, false), write(0, 5, 25, false)];
        assert_eq!(rejected(&writes, &sections), (1, 1));
    }
}
