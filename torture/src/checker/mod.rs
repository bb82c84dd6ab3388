//! The checker: reads a run's merged history (and the resource's own record) and hands it to
//! the history checker (`lock_testkit::history`), whose verdicts are the report's: overlapping
//! valid leases (an exclusive holder beside anyone), more semaphore permit holders at once than
//! permits, fencing tokens that did not grow, and whether the fenced resource, as a register,
//! is linearizable with every write's answer and the final log. Beside them it counts what the
//! torture suite reports about the run: stale writes accepted and rejected, lost updates of the
//! unfenced counter, renewals after a release and the time to recover after each fault.
//!
//! It judges only from what was recorded; whether a figure is acceptable is the scenario's
//! [`Expected`](crate::scenario::Expected) verdict, written before the run.

mod ops;
mod recovery;
mod sections;
mod writes;

use std::time::Duration;

pub use lock_testkit::history::{Overlap, RegisterCheck, Search};
pub use recovery::Recovery;
pub use sections::Section;

use crate::history::{Event, Record};
use crate::resource::Snapshot;

/// Overlaps shorter than this are measurement noise, not a second holder: the history's
/// timestamps are taken around, not at, the moments they describe (all of them on the side
/// that shrinks a section), and a lease's `valid_until` is carried from the monotonic clock to
/// the wall clock with microseconds of error.
pub const SLACK: Duration = Duration::from_millis(1);

/// A run's history: each worker's records in the order it wrote them, and the runner's.
#[derive(Debug, Clone, Default)]
pub struct History {
    /// One list per worker, in file order.
    pub workers: Vec<Vec<Record>>,
    /// The fault schedule's records.
    pub faults: Vec<Record>,
}

/// What the checker found.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Grants recorded.
    pub grants: usize,
    /// Acquires that gave up or failed.
    pub acquire_failures: usize,
    /// Critical sections open at once, one of them exclusive (a mutex, writer or fair holder).
    pub overlaps: Vec<Overlap>,
    /// Grants of a semaphore permit that arrived while as many holders as it has permits were
    /// inside already.
    pub over_permits: usize,
    /// The most shared holders (readers, permit holders) inside at once: above 1, the shared
    /// kinds did share.
    pub most_shared: usize,
    /// Fenced writes accepted (history).
    pub accepted: usize,
    /// The fenced resource as a register, one per lock name with fenced writes or a log (one,
    /// but for the multi-lock's names): whether some order of the writes, each between its
    /// sending and its answer, explains every answer and the final log under the fence's rule.
    pub registers: Vec<RegisterCheck>,
    /// Entries of the resource's log that the lock should never have let in: a token below an
    /// entry's before it, or equal to the largest but from another worker (the fence accepts an
    /// equal token; only a second holder with the same token writes one). The register check
    /// ties the log to the workers' answers, so this is the stale writes accepted.
    pub stale_accepted: usize,
    /// Writes rejected after the writer's lease had ended: fencing at work.
    pub stale_rejected: usize,
    /// Writes rejected while the writer's lease was valid: a larger token was accepted while
    /// this holder held the lock, so the lock was granted twice or a token went backwards.
    pub rejected_while_valid: usize,
    /// Grants whose token was not above an earlier grant's.
    pub token_regressions: usize,
    /// Writes sent after the writer's lease had ended.
    pub late_writes: usize,
    /// Completed read-modify-writes of the plain counter.
    pub increments: u64,
    /// The counter's final value.
    pub counter: u64,
    /// Renewals the watchdog finished, by any outcome.
    pub renewals: usize,
    /// Renewals finished after a release had returned (before the next grant).
    pub renewals_after_release: usize,
    /// Commands of the workers' own that failed (counter, resource).
    pub worker_errors: usize,
    /// For every healed fault, how long until the next grant.
    pub recoveries: Vec<Recovery>,
}

impl Report {
    /// Whether a register check failed: not linearizable, or undecided within its budget.
    pub fn register_failed(&self) -> bool {
        self.registers.iter().any(|r| !r.is_linearizable())
    }

    /// The register check to show: the first that failed, else the first; `None` when there
    /// were no fenced writes.
    pub fn register(&self) -> Option<&RegisterCheck> {
        self.registers
            .iter()
            .find(|r| !r.is_linearizable())
            .or(self.registers.first())
    }

    /// Increments the counter lost: two holders read the same value, or a holder wrote after
    /// its lease and overwrote a newer value.
    pub fn lost_updates(&self) -> u64 {
        self.increments.saturating_sub(self.counter)
    }

    /// The longest overlap, if any.
    pub fn longest_overlap(&self) -> Option<Duration> {
        self.overlaps
            .iter()
            .map(|o| Duration::from_nanos(o.overlap_ns))
            .max()
    }

    /// The slowest recovery; `None` inside if some fault was never followed by a grant.
    pub fn slowest_recovery(&self) -> Option<Option<Duration>> {
        self.recoveries
            .iter()
            .map(|r| r.after)
            .max_by_key(|after| after.map_or(Duration::MAX, |d| d))
    }
}

/// Checks a run.
pub fn check(history: &History, resource: &Snapshot) -> Report {
    let all: Vec<Record> = history.workers.iter().flatten().cloned().collect();
    let sections: Vec<Section> = history
        .workers
        .iter()
        .flat_map(|records| sections::of_worker(records))
        .collect();
    let writes = writes::writes(&all);
    let (stale_rejected, rejected_while_valid) = writes::rejected(&writes, &sections);
    let verdict = lock_testkit::history::check(&ops::history(
        &history.workers,
        &sections,
        resource,
        writes_slack(),
    ));
    Report {
        grants: sections.len(),
        acquire_failures: count(&all, |e| matches!(e, Event::AcquireFailed { .. })),
        overlaps: verdict.overlaps,
        over_permits: verdict.over_permits,
        most_shared: verdict.most_shared,
        accepted: writes.iter().filter(|w| w.accepted).count(),
        registers: verdict.registers,
        stale_accepted: writes::stale_in_log(&resource.accepted),
        stale_rejected,
        rejected_while_valid,
        token_regressions: verdict.token_regressions.len(),
        late_writes: writes::late_writes(&all, &sections),
        increments: writes::increments(&all),
        counter: resource.counter,
        renewals: count(&all, |e| matches!(e, Event::Renewal { .. })),
        renewals_after_release: history
            .workers
            .iter()
            .map(|records| renewals_after_release(records))
            .sum(),
        worker_errors: count(&all, |e| matches!(e, Event::Error { .. })),
        recoveries: recovery::recoveries(&history.faults, &sections),
    }
}

fn writes_slack() -> u64 {
    crate::history::nanos(SLACK)
}

fn count(records: &[Record], pred: impl Fn(&Event) -> bool) -> usize {
    records.iter().filter(|r| pred(&r.event)).count()
}

/// Renewals one worker finished after its release returned and before its next grant. The
/// locker stops renewing before it sends the release and the release waits for a renewal in
/// flight, so none may appear there. (Between sending the release and its answer a renewal
/// that was already in flight may still finish; that window is not judged.)
fn renewals_after_release(records: &[Record]) -> usize {
    let mut released = false;
    let mut after = 0;
    for record in records {
        match record.event {
            Event::Granted { .. } => released = false,
            Event::Released { .. } => released = true,
            Event::Renewal { .. } if released => after += 1,
            _ => {}
        }
    }
    after
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(at_ns: u64, event: Event) -> Record {
        Record {
            at_ns,
            worker: Some(0),
            lock: None,
            event,
        }
    }

    #[test]
    fn a_renewal_after_a_release_is_counted_until_the_next_grant() {
        let granted = |at| {
            rec(
                at,
                Event::Granted {
                    requested_ns: at,
                    token: at,
                    valid_until_ns: at + 100,
                    lease_ns: 100,
                    held: crate::history::Held::Exclusive,
                },
            )
        };
        let renewal = |at| {
            rec(
                at,
                Event::Renewal {
                    outcome: "ok".into(),
                },
            )
        };
        let released = |at| {
            rec(
                at,
                Event::Released {
                    token: 0,
                    outcome: "ours".into(),
                },
            )
        };
        let records = [
            granted(1),
            renewal(2),
            released(3),
            renewal(4),
            granted(5),
            renewal(6),
        ];
        assert_eq!(renewals_after_release(&records), 1);
    }
}
