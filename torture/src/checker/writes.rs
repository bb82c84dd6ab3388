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
    pub(super) answered_ns: u64,
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
                answered_ns: r.at_ns,
                accepted,
            }),
            _ => None,
        })
        .collect()
}

/// Accepted writes the fence should have refused, judged from the history: a token smaller
/// than one accepted (and answered) before this write was sent, or equal to one another worker
/// had written (the fence's rule accepts an equal token: one holder writing many times, never a
/// second holder with the same token).
pub(super) fn stale_accepted(writes: &[Write]) -> usize {
    let mut accepted: Vec<&Write> = writes.iter().filter(|w| w.accepted).collect();
    accepted.sort_by_key(|w| w.answered_ns);
    let answered: Vec<u64> = accepted.iter().map(|w| w.answered_ns).collect();
    let best: Vec<u64> = running_max(accepted.iter().map(|w| w.token));
    accepted
        .iter()
        .filter(|w| {
            let before = answered.partition_point(|&t| t < w.sent_ns);
            before > 0
                && (best[before - 1] > w.token
                    || accepted[..before]
                        .iter()
                        .any(|e| e.token == w.token && e.worker != w.worker))
        })
        .count()
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

/// Writes the fenced log holds that no worker recorded as accepted (and the other way round),
/// by token and worker: both views must tell the same story. A write that failed without an
/// answer (`unknown`: its store faulted under it) may or may not be in the log: each one
/// explains at most one extra entry of its token and worker.
pub(super) fn log_mismatches(writes: &[Write], unknown: &[Accepted], log: &[Accepted]) -> usize {
    let mut counts: HashMap<(u64, u32), i64> = HashMap::new();
    for w in writes.iter().filter(|w| w.accepted) {
        *counts.entry((w.token, w.worker)).or_default() += 1;
    }
    for entry in log {
        *counts.entry((entry.token, entry.worker)).or_default() -= 1;
    }
    for u in unknown {
        if let Some(count) = counts.get_mut(&(u.token, u.worker))
            && *count < 0
        {
            *count += 1;
        }
    }
    counts
        .values()
        .map(|c| usize::try_from(c.unsigned_abs()).unwrap_or(usize::MAX))
        .sum()
}

/// Fenced writes that failed without an answer, by token and worker.
pub(super) fn unknown_writes(records: &[Record]) -> Vec<Accepted> {
    records
        .iter()
        .filter_map(|r| match r.event {
            Event::Error {
                token: Some(token), ..
            } => Some(Accepted {
                token,
                worker: r.worker.unwrap_or(u32::MAX),
            }),
            _ => None,
        })
        .collect()
}

/// Exclusive grants whose token was not above that of an exclusive grant that arrived before
/// they were requested: a holder the resource would wrongly turn away. (A reader's token is
/// the last write's, and shared holders write nothing: only exclusive grants must grow.)
pub(super) fn token_regressions(sections: &[Section]) -> usize {
    let mut by_grant: Vec<&Section> = sections.iter().filter(|s| s.held.is_exclusive()).collect();
    by_grant.sort_by_key(|s| s.start_ns);
    let granted: Vec<u64> = by_grant.iter().map(|s| s.start_ns).collect();
    let best = running_max(by_grant.iter().map(|s| s.token));
    by_grant
        .iter()
        .filter(|s| {
            let before = granted.partition_point(|&t| t < s.requested_ns);
            before > 0 && best[before - 1] >= s.token
        })
        .count()
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

fn running_max(values: impl Iterator<Item = u64>) -> Vec<u64> {
    let mut best = 0;
    values
        .map(|v| {
            best = best.max(v);
            best
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::Held;

    fn write(worker: u32, token: u64, sent_ns: u64, answered_ns: u64, accepted: bool) -> Write {
        Write {
            worker,
            token,
            sent_ns,
            answered_ns,
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
    fn a_smaller_token_accepted_after_a_larger_one_is_stale() {
        let fine = [write(0, 5, 10, 11, true), write(1, 7, 20, 21, true)];
        assert_eq!(stale_accepted(&fine), 0);
        let bad = [write(0, 7, 10, 11, true), write(1, 5, 20, 21, true)];
        assert_eq!(stale_accepted(&bad), 1);
        // Concurrent writes are ordered by the resource, not by the history: not judged.
        let concurrent = [write(0, 7, 10, 30, true), write(1, 5, 20, 25, true)];
        assert_eq!(stale_accepted(&concurrent), 0);
    }

    #[test]
    fn one_holder_may_repeat_its_token_and_nobody_else() {
        let repeated = [
            write(0, 5, 10, 11, true),
            write(0, 5, 12, 13, true),
            write(1, 7, 20, 21, true),
            write(1, 7, 22, 23, true),
        ];
        assert_eq!(stale_accepted(&repeated), 0);
        let second_holder = [write(0, 5, 10, 11, true), write(1, 5, 12, 13, true)];
        assert_eq!(stale_accepted(&second_holder), 1);
        let stale_after_repeats = [
            write(0, 5, 10, 11, true),
            write(1, 7, 20, 21, true),
            write(1, 7, 22, 23, true),
            write(0, 5, 30, 31, true),
        ];
        assert_eq!(stale_accepted(&stale_after_repeats), 1);
    }

    #[test]
    fn the_log_must_not_go_back_and_must_match_the_history() {
        assert_eq!(stale_in_log(&log(&[(1, 0), (2, 1), (5, 0), (9, 2)])), 0);
        assert_eq!(stale_in_log(&log(&[(1, 0), (1, 0), (5, 1), (5, 1)])), 0);
        assert_eq!(
            stale_in_log(&log(&[(1, 0), (5, 1), (3, 0), (5, 1), (9, 2)])),
            1
        );
        assert_eq!(stale_in_log(&log(&[(5, 1), (5, 2)])), 1);
        let writes = [
            write(0, 1, 0, 1, true),
            write(0, 1, 2, 3, true),
            write(0, 2, 4, 5, false),
        ];
        assert_eq!(log_mismatches(&writes, &[], &log(&[(1, 0), (1, 0)])), 0);
        assert_eq!(log_mismatches(&writes, &[], &log(&[(1, 0)])), 1);
        assert_eq!(log_mismatches(&writes, &[], &log(&[(1, 0), (1, 1)])), 2);
        assert_eq!(
            log_mismatches(&writes, &[], &log(&[(1, 0), (1, 0), (2, 0)])),
            1
        );
        // A write without an answer may have applied: one extra entry of it is explained, and
        // its absence is fine too.
        let unknown = log(&[(3, 0)]);
        let three = log(&[(1, 0), (1, 0), (3, 0)]);
        assert_eq!(log_mismatches(&writes, &unknown, &three), 0);
        assert_eq!(
            log_mismatches(&writes, &unknown, &log(&[(1, 0), (1, 0)])),
            0
        );
        let twice = log(&[(1, 0), (1, 0), (3, 0), (3, 0)]);
        assert_eq!(log_mismatches(&writes, &unknown, &twice), 1);
    }

    #[test]
    fn tokens_must_grow_from_grant_to_grant() {
        let good = [section(0, 5, 10, 20), section(1, 6, 30, 40)];
        assert_eq!(token_regressions(&good), 0);
        let bad = [section(0, 6, 10, 20), section(1, 5, 30, 40)];
        assert_eq!(token_regressions(&bad), 1);
    }

    #[test]
    fn rejections_are_split_by_lease() {
        let sections = [section(0, 5, 10, 20)];
        let writes = [write(0, 5, 15, 16, false), write(0, 5, 25, 26, false)];
        assert_eq!(rejected(&writes, &sections), (1, 1));
    }
}
