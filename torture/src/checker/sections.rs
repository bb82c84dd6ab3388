//! Critical sections and their overlaps: two sections open at once where one of them is
//! exclusive (a mutex, a writer, a fair holder), and more permit holders at once than the
//! semaphore has permits.

use crate::history::{Event, Held, Record};

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
    /// What the grant shares.
    pub held: Held,
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
                held,
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
                    held: *held,
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

/// Every pair of sections of different grants open at once for longer than `slack_ns`, one of
/// them exclusive (readers beside readers and permit holders beside permit holders are the
/// point of those kinds; the permit count is [`over_permits`]'s).
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
            let exclusive = first.held.is_exclusive() || second.held.is_exclusive();
            if exclusive && overlap_ns > slack_ns {
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

/// Shared holders (readers, permit holders) open at once: `(most, over)`, where `most` is the
/// most sections open at once and `over` counts the grants that arrived while as many permit
/// holders as the semaphore has were inside already. Each section is taken to end `slack_ns`
/// early, as two sections must overlap by more than the slack to count in [`overlaps`].
pub(super) fn shared(sections: &[Section], slack_ns: u64) -> (usize, usize) {
    // (time, 0 = an end before a start at the same time, the section's permits if a start)
    let mut events: Vec<(u64, u8, Option<u32>)> = Vec::new();
    for s in sections.iter().filter(|s| !s.held.is_exclusive()) {
        let max = match s.held {
            Held::Permit { max } => Some(max),
            _ => None,
        };
        let end = s.end_ns.saturating_sub(slack_ns);
        if end > s.start_ns {
            events.push((s.start_ns, 1, max));
            events.push((end, 0, max));
        }
    }
    events.sort_unstable_by_key(|&(at, order, _)| (at, order));
    let (mut open, mut most, mut over) = (0_usize, 0, 0);
    for (_, order, max) in events {
        if order == 0 {
            open = open.saturating_sub(1);
            continue;
        }
        open += 1;
        most = most.max(open);
        if max.is_some_and(|max| open > usize::try_from(max).unwrap_or(usize::MAX)) {
            over += 1;
        }
    }
    (most, over)
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
        granted_as(at, worker, token, valid_until_ns, Held::Exclusive)
    }

    fn granted_as(at: u64, worker: u32, token: u64, valid_until_ns: u64, held: Held) -> Record {
        rec(
            at,
            worker,
            Event::Granted {
                requested_ns: at - 1,
                token,
                valid_until_ns,
                lease_ns: 1_000,
                held,
            },
        )
    }

    /// A section of `held` from `start` to `end`, released in time.
    fn section(worker: u32, start: u64, end: u64, held: Held) -> Vec<Section> {
        of_worker(&[
            granted_as(start, worker, 1, 10_000, held),
            release(end, worker, 1, 10_000),
        ])
    }

    #[test]
    fn readers_share_and_a_writer_is_alone() {
        let read = Held::Read;
        let all: Vec<Section> = [
            section(0, 10, 100, read),
            section(1, 20, 120, read),
            section(2, 110, 200, Held::Exclusive),
            section(3, 300, 400, read),
        ]
        .concat();
        let found = overlaps(&all, 0);
        assert_eq!(found.len(), 1, "only the writer beside a reader: {found:?}");
        assert_eq!((found[0].first.worker, found[0].second.worker), (1, 2));
        assert_eq!(shared(&all, 0), (2, 0), "two readers at once, no permits");
    }

    #[test]
    fn more_permit_holders_than_permits_are_counted() {
        let permit = Held::Permit { max: 2 };
        let fine: Vec<Section> = [
            section(0, 10, 100, permit),
            section(1, 20, 100, permit),
            section(2, 100, 200, permit),
        ]
        .concat();
        assert!(overlaps(&fine, 0).is_empty(), "permit holders share");
        assert_eq!(
            shared(&fine, 0),
            (2, 0),
            "a start at another's end is a handoff"
        );
        let over: Vec<Section> = [fine, section(3, 50, 150, permit)].concat();
        assert_eq!(
            shared(&over, 0),
            (3, 1),
            "the one grant that came with both permits taken"
        );
        assert_eq!(shared(&over, 60), (2, 0), "within the slack");
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
