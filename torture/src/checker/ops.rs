//! A run's records as the history checker's operations (`lock_testkit::history`): each
//! section a hold, each fenced write an invocation with its answer (or none), and the
//! resource's final log.

use std::collections::BTreeMap;

use lock_testkit::history::{FenceRule, FencedWrite, History, Hold, LogEntry, Share, WriteOutcome};

use super::sections::Section;
use crate::history::LOCK_NAME;
use crate::history::{Event, Held, Record};
use crate::resource::Snapshot;

/// The checker's history of a run: `sections` as holds, every worker's fenced writes, and the
/// resource's log as `resource` holds it; overlaps up to `slack_ns` are noise.
pub(super) fn history(
    workers: &[Vec<Record>],
    sections: &[Section],
    resource: &Snapshot,
    slack_ns: u64,
) -> History {
    let writes: Vec<FencedWrite> = workers.iter().flat_map(|r| fenced_writes(r)).collect();
    History {
        holds: sections.iter().map(hold).collect(),
        logs: logs(resource, &writes),
        writes,
        rule: if resource.guarded {
            FenceRule::Holder
        } else {
            FenceRule::Order
        },
        slack_ns,
    }
}

/// The resource's log, one per lock name (a multi-lock's names are fenced apart), each in the
/// order it was accepted. Every name written to has one, empty when nothing was accepted
/// (the whole log was read), and so has the run's one lock when nothing was written at all.
fn logs(resource: &Snapshot, writes: &[FencedWrite]) -> BTreeMap<String, Vec<LogEntry>> {
    let mut logs: BTreeMap<String, Vec<LogEntry>> = writes
        .iter()
        .map(|w| (w.name.clone(), Vec::new()))
        .collect();
    if logs.is_empty() && resource.accepted.iter().all(|a| a.lock.is_none()) {
        logs.insert(LOCK_NAME.to_owned(), Vec::new());
    }
    for a in &resource.accepted {
        logs.entry(a.lock.clone().unwrap_or_else(|| LOCK_NAME.to_owned()))
            .or_default()
            .push(LogEntry {
                token: a.token,
                process: a.worker,
            });
    }
    logs
}

fn hold(s: &Section) -> Hold {
    Hold {
        name: s.lock.clone(),
        process: s.worker,
        token: s.token,
        requested_ns: s.requested_ns,
        start_ns: s.start_ns,
        end_ns: s.end_ns,
        share: match s.held {
            Held::Exclusive => Share::Exclusive,
            Held::Read => Share::Read,
            Held::Permit { max } => Share::Permit { max },
        },
    }
}

/// One worker's fenced writes: each answered one with its times, and each that failed without
/// an answer (its store faulted under it) as unknown, invoked no earlier than the worker's
/// record before it (its sending time was not recorded; earlier is the lenient side).
pub(super) fn fenced_writes(records: &[Record]) -> Vec<FencedWrite> {
    let mut writes = Vec::new();
    let mut previous_ns = 0;
    for r in records {
        let process = r.worker.unwrap_or(u32::MAX);
        let write = |token, invoke_ns, outcome| FencedWrite {
            name: r.lock().to_owned(),
            process,
            token,
            invoke_ns,
            outcome,
        };
        match r.event {
            Event::Write {
                token,
                sent_ns,
                accepted,
            } => writes.push(write(
                token,
                sent_ns,
                if accepted {
                    WriteOutcome::Accepted { at_ns: r.at_ns }
                } else {
                    WriteOutcome::Rejected { at_ns: r.at_ns }
                },
            )),
            Event::Error {
                token: Some(token), ..
            } => writes.push(write(token, previous_ns, WriteOutcome::Unknown)),
            _ => {}
        }
        previous_ns = r.at_ns;
    }
    writes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_without_an_answer_is_unknown_from_the_record_before_it() {
        let rec = |at_ns, event| Record {
            at_ns,
            worker: Some(2),
            lock: None,
            event,
        };
        let records = [
            rec(
                10,
                Event::Write {
                    token: 5,
                    sent_ns: 8,
                    accepted: true,
                },
            ),
            rec(
                20,
                Event::Error {
                    op: "fenced write".into(),
                    message: "timeout".into(),
                    token: Some(5),
                },
            ),
        ];
        let writes = fenced_writes(&records);
        assert_eq!(writes.len(), 2);
        assert_eq!(writes[0].outcome, WriteOutcome::Accepted { at_ns: 10 });
        assert_eq!(
            (writes[1].invoke_ns, writes[1].outcome),
            (10, WriteOutcome::Unknown)
        );
    }
}
