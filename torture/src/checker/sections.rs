//! Critical sections: each grant's valid lease, read from one worker's history. The history
//! checker (`lock_testkit::history`) judges them: overlaps where one is exclusive, permit
//! holders beyond the permits, fencing tokens that did not grow.

use crate::history::{Event, Held, Record};

/// What one grant promised: from the moment the grant reached the worker until the worker
/// sent its release or the lease's `valid_until` passed, whichever came first. Two of these
/// may never overlap where the algorithm promises exclusion (on one lock name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    /// The lock name held.
    pub lock: String,
    /// The holder.
    pub worker: u32,
    /// The grant's fencing token.
    pub token: u64,
    /// When the acquire was requested.
    pub requested_ns: u64,
    /// When the grant arrived.
    pub start_ns: u64,
    /// When the section ended (never before `start_ns`: a grant that arrived after its own
    /// `valid_until` promised nothing).
    pub end_ns: u64,
    /// What the grant shares.
    pub held: Held,
}

/// The sections of one worker's history, in order of their ends. A multi-lock holder has one
/// open per name, each ended by its own name's release.
pub(super) fn of_worker(records: &[Record]) -> Vec<Section> {
    let mut sections = Vec::new();
    // (section, valid_until, lease), one per lock name held.
    let mut open: Vec<(Section, u64, u64)> = Vec::new();
    for record in records {
        let worker = record.worker.unwrap_or(u32::MAX);
        let lock = record.lock();
        let mine = open.iter().position(|(s, _, _)| s.lock == lock);
        match &record.event {
            Event::Granted {
                requested_ns,
                token,
                valid_until_ns,
                lease_ns,
                held,
            } => {
                if let Some(unfinished) = mine.map(|i| open.swap_remove(i)) {
                    sections.push(close_unreleased(unfinished));
                }
                let section = Section {
                    lock: lock.to_owned(),
                    worker,
                    token: *token,
                    requested_ns: *requested_ns,
                    start_ns: record.at_ns,
                    end_ns: record.at_ns,
                    held: *held,
                };
                open.push((section, *valid_until_ns, *lease_ns));
            }
            Event::Renewal { outcome } if outcome == "ok" => {
                // Only used if the worker never says when it released: the renewal moved
                // `valid_until` to at most one lease after it finished. A renewal names no
                // lock, so it moves every open one's (the longer section: the strict side).
                for (_, valid_until, lease) in &mut open {
                    *valid_until = (*valid_until).max(record.at_ns.saturating_add(*lease));
                }
            }
            Event::ReleaseSent {
                token,
                valid_until_ns,
                ..
            } => {
                if let Some((mut section, _, _)) = mine.map(|i| open.swap_remove(i)) {
                    if section.token == *token {
                        section.end_ns = record.at_ns.min(*valid_until_ns).max(section.start_ns);
                        sections.push(section);
                    } else {
                        sections.push(close_unreleased((section, *valid_until_ns, 0)));
                    }
                }
            }
            _ => {}
        }
    }
    sections.extend(open.into_iter().map(close_unreleased));
    sections
}

/// A grant without a release in the history (the worker died holding it) lasted until its
/// lease ran out.
fn close_unreleased((mut section, valid_until, _): (Section, u64, u64)) -> Section {
    section.end_ns = valid_until.max(section.start_ns);
    section
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(at_ns: u64, worker: u32, event: Event) -> Record {
        Record {
            at_ns,
            worker: Some(worker),
            lock: None,
            event,
        }
    }

    fn granted(at: u64, worker: u32, token: u64, valid_until_ns: u64) -> Record {
        rec(
            at,
            worker,
            Event::Granted {
                requested_ns: at - 1,
                token,
                valid_until_ns,
                lease_ns: 1_000,
                held: Held::Exclusive,
            },
        )
    }

    fn release(at: u64, worker: u32, token: u64, valid_until_ns: u64) -> Record {
        rec(
            at,
            worker,
            Event::ReleaseSent {
                token,
                valid_until_ns,
                held: true,
            },
        )
    }

    #[test]
    fn a_section_ends_at_release_or_lease_end() {
        let released = of_worker(&[granted(10, 0, 1, 100), release(50, 0, 1, 100)]);
        assert_eq!((released[0].start_ns, released[0].end_ns), (10, 50));
        let expired = of_worker(&[granted(10, 0, 1, 100), release(500, 0, 1, 100)]);
        assert_eq!(expired[0].end_ns, 100);
        let late = of_worker(&[granted(10, 0, 1, 5), release(20, 0, 1, 5)]);
        assert_eq!(
            late[0].end_ns, 10,
            "a grant that arrived expired promised nothing"
        );
    }

    #[test]
    fn an_unreleased_grant_lasts_until_its_renewed_lease_ends() {
        let sections = of_worker(&[
            granted(10, 0, 1, 1_010),
            rec(
                400,
                0,
                Event::Renewal {
                    outcome: "ok".into(),
                },
            ),
        ]);
        assert_eq!(sections[0].end_ns, 1_400);
    }

    #[test]
    fn a_multi_lock_holder_has_a_section_per_name() {
        let on = |lock: &str, record: Record| Record {
            lock: Some(lock.into()),
            ..record
        };
        let sections = of_worker(&[
            on("a", granted(10, 0, 1, 1_000)),
            on("b", granted(11, 0, 1, 1_000)),
            on("a", release(50, 0, 1, 1_000)),
            on("b", release(51, 0, 1, 1_000)),
        ]);
        let spans: Vec<_> = sections
            .iter()
            .map(|s| (s.lock.as_str(), s.start_ns, s.end_ns))
            .collect();
        assert_eq!(spans, [("a", 10, 50), ("b", 11, 51)]);
    }
}
