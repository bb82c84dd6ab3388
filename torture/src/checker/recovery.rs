//! Time to recover: from each fault's heal to the next grant.

use std::time::Duration;

use super::sections::Section;
use crate::history::{Event, Record};

/// How one healed fault was recovered from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recovery {
    /// What was healed.
    pub label: String,
    /// When, ns since the epoch.
    pub healed_ns: u64,
    /// How long the lock stayed unavailable after the heal; `None` if no grant came after it.
    ///
    /// Counted from when the lock was free again: the heal itself, or, if someone held the
    /// lock at that moment, the end of that holder's section (a holder that keeps the lock for
    /// a second is not a slow recovery). Zero if the next grant arrived before then (a second
    /// holder: the overlap check judges that).
    pub after: Option<Duration>,
    /// From the heal itself to the next grant, whoever held the lock then: what a store grace
    /// period must make at least as long as the grace.
    pub since_heal: Option<Duration>,
}

/// One [`Recovery`] per `FaultHealed` record.
pub(super) fn recoveries(faults: &[Record], sections: &[Section]) -> Vec<Recovery> {
    let mut grants: Vec<u64> = sections.iter().map(|s| s.start_ns).collect();
    grants.sort_unstable();
    faults
        .iter()
        .filter_map(|record| match &record.event {
            Event::FaultHealed { label } => {
                let healed = record.at_ns;
                let free_at = sections
                    .iter()
                    .filter(|s| s.start_ns <= healed && healed < s.end_ns)
                    .map(|s| s.end_ns)
                    .fold(healed, u64::max);
                let next = grants.partition_point(|&g| g <= healed);
                Some(Recovery {
                    label: label.clone(),
                    healed_ns: healed,
                    after: grants
                        .get(next)
                        .map(|&g| Duration::from_nanos(g.saturating_sub(free_at))),
                    since_heal: grants
                        .get(next)
                        .map(|&g| Duration::from_nanos(g.saturating_sub(healed))),
                })
            }
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::Held;

    #[test]
    fn recovery_runs_to_the_next_grant() {
        let section = |start_ns| Section {
            lock: crate::history::LOCK_NAME.to_owned(),
            worker: 0,
            token: start_ns,
            requested_ns: start_ns,
            start_ns,
            end_ns: start_ns + 1,
            held: Held::Exclusive,
        };
        let healed = |at_ns| Record {
            at_ns,
            worker: None,
            lock: None,
            event: Event::FaultHealed {
                label: "heal".into(),
            },
        };
        let found = recoveries(
            &[healed(100), healed(500)],
            &[section(50), section(130), section(400)],
        );
        assert_eq!(found[0].after, Some(Duration::from_nanos(30)));
        assert_eq!(found[0].since_heal, Some(Duration::from_nanos(30)));
        assert_eq!(found[1].after, None);
    }

    #[test]
    fn a_holder_at_the_heal_is_not_counted_as_downtime() {
        let section = |start_ns, end_ns| Section {
            lock: crate::history::LOCK_NAME.to_owned(),
            worker: 0,
            token: start_ns,
            requested_ns: start_ns,
            start_ns,
            end_ns,
            held: Held::Exclusive,
        };
        let healed = Record {
            at_ns: 100,
            worker: None,
            lock: None,
            event: Event::FaultHealed {
                label: "heal".into(),
            },
        };
        // Held from 90 to 300 across the heal; the next grant comes 20 after that release.
        let found = recoveries(
            std::slice::from_ref(&healed),
            &[section(90, 300), section(320, 400)],
        );
        assert_eq!(found[0].after, Some(Duration::from_nanos(20)));
    }
}
