//! Critical sections and their overlaps.

use crate::history::{Event, Record};

/// What one grant promised: from the moment the grant reached the worker until the worker
/// sent its release or the lease's `valid_until` passed, whichever came first. Two of these
/// may never overlap where the algorithm promises exclusion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Section {
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
}

/// Two sections that overlapped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Overlap {
    /// The section that started first.
    pub first: Section,
    /// The one that started inside it.
    pub second: Section,
    /// How long both were open.
    pub overlap_ns: u64,
}

/// The sections of one worker's history, in order.
pub(super) fn of_worker(records: &[Record]) -> Vec<Section> {
    let mut sections = Vec::new();
    let mut open: Option<(Section, u64, u64)> = None; // (section, valid_until, lease)
    for record in records {
        let worker = record.worker.unwrap_or(u32::MAX);
        match &record.event {
            Event::Granted {
                requested_ns,
                token,
                valid_until_ns,
                lease_ns,
            } => {
                if let Some(unfinished) = open.take() {
                    sections.push(close_unreleased(unfinished));
                }
                let section = Section {
                    worker,
                    token: *token,
                    requested_ns: *requested_ns,
                    start_ns: record.at_ns,
                    end_ns: record.at_ns,
                };
                open = Some((section, *valid_until_ns, *lease_ns));
            }
            Event::Renewal { outcome } if outcome == "ok" => {
                // Only used if the worker never says when it released: the renewal moved
                // `valid_until` to at most one lease after it finished.
                if let Some((_, valid_until, lease)) = open.as_mut() {
                    *valid_until = (*valid_until).max(record.at_ns.saturating_add(*lease));
                }
            }
            Event::ReleaseSent {
                token,
                valid_until_ns,
                ..
            } => {
                if let Some((mut section, _, _)) = open.take() {
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
    if let Some(unfinished) = open {
        sections.push(close_unreleased(unfinished));
    }
    sections
}

/// A grant without a release in the history (the worker died holding it) lasted until its
/// lease ran out.
fn close_unreleased((mut section, valid_until, _): (Section, u64, u64)) -> Section {
    section.end_ns = valid_until.max(section.start_ns);
    section
}

/// Every pair of sections of different grants open at once for longer than `slack_ns`.
pub(super) fn overlaps(sections: &[Section], slack_ns: u64) -> Vec<Overlap> {
    let mut sorted: Vec<&Section> = sections.iter().filter(|s| s.end_ns > s.start_ns).collect();
    sorted.sort_by_key(|s| (s.start_ns, s.end_ns));
    let mut found = Vec::new();
    for (i, first) in sorted.iter().enumerate() {
        for second in &sorted[i + 1..] {
            if second.start_ns >= first.end_ns {
                break;
            }
            let overlap_ns = first.end_ns.min(second.end_ns) - second.start_ns;
            if overlap_ns > slack_ns {
                found.push(Overlap {
                    first: **first,
                    second: **second,
                    overlap_ns,
                });
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(at_ns: u64, worker: u32, event: Event) -> Record {
        Record {
            at_ns,
            worker: Some(worker),
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
    fn overlaps_are_found_and_handoffs_are_not() {
        let a = of_worker(&[granted(10, 0, 1, 1_000), release(100, 0, 1, 1_000)]);
        let b = of_worker(&[granted(101, 1, 2, 1_000), release(200, 1, 2, 1_000)]);
        let c = of_worker(&[granted(150, 2, 3, 1_000), release(300, 2, 3, 1_000)]);
        let all: Vec<Section> = a.into_iter().chain(b).chain(c).collect();
        let found = overlaps(&all, 0);
        assert_eq!(found.len(), 1);
        assert_eq!((found[0].first.token, found[0].second.token), (2, 3));
        assert_eq!(found[0].overlap_ns, 50);
        assert!(overlaps(&all, 50).is_empty(), "within the slack");
    }
}
