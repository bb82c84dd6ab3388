//! The fenced resource as a register: its sequential specification, and the check that a
//! history of fenced writes (and the resource's final log, read after them) is linearizable
//! against it.

use std::collections::HashSet;

use super::search::{Model, Search, Timed, linearize};
use super::{FenceRule, FencedWrite, LogEntry, WriteOutcome};

/// Search steps allowed per name: far above what the torture suite's histories take (a few
/// steps per event when holders write one at a time), and about a second of work.
pub const SEARCH_BUDGET: usize = 2_000_000;

/// One operation on the register.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RegisterOp {
    /// A fenced write of `token` by `process`, with its recorded outcome.
    Write {
        token: u64,
        process: u32,
        outcome: Outcome,
    },
    /// The read of the whole log, after every process stopped.
    ReadLog,
}

/// A write's outcome, without its time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Outcome {
    Accepted,
    Rejected,
    Unknown,
}

/// The fence's sequential specification. State: the largest token accepted, and how many
/// entries of the final log the accepted writes have produced so far (0 without a log).
struct FencedLog<'a> {
    rule: FenceRule,
    log: Option<&'a [LogEntry]>,
}

impl FencedLog<'_> {
    /// The state after `process`'s write of `token` is accepted, if the fence may accept it.
    fn accept(&self, (max, pos): (u64, usize), token: u64, process: u32) -> Option<(u64, usize)> {
        if token < max {
            return None;
        }
        match self.log {
            None => Some((token, pos)),
            Some(log) => {
                (log.get(pos) == Some(&LogEntry { token, process })).then_some((token, pos + 1))
            }
        }
    }
}

impl Model for FencedLog<'_> {
    type State = (u64, usize);
    type Op = RegisterOp;

    fn init(&self) -> (u64, usize) {
        (0, 0)
    }

    fn step(&self, &state: &(u64, usize), op: &RegisterOp) -> Vec<(u64, usize)> {
        match *op {
            RegisterOp::Write {
                token,
                process,
                outcome: Outcome::Accepted,
            } => self.accept(state, token, process).into_iter().collect(),
            RegisterOp::Write {
                token,
                outcome: Outcome::Rejected,
                ..
            } => {
                // The order fence refuses exactly the tokens below its record; a holder's
                // guard refuses whenever the writer is not the holder any more, which a token
                // at or above the record may be too.
                let refusable = self.rule == FenceRule::Holder || token < state.0;
                if refusable { vec![state] } else { Vec::new() }
            }
            RegisterOp::Write {
                token,
                process,
                outcome: Outcome::Unknown,
            } => {
                // Refused, lost before the fence, or accepted: each is possible.
                let mut next = vec![state];
                next.extend(self.accept(state, token, process));
                next
            }
            RegisterOp::ReadLog => match self.log {
                Some(log) if state.1 != log.len() => Vec::new(),
                _ => vec![state],
            },
        }
    }
}

/// The register check of one name's writes: the search's answer, and the operations checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegisterCheck {
    /// The lock name (the fenced resource it guards).
    pub name: String,
    /// Operations searched: the writes (less those left out, see `unknown_left_out`) and the
    /// final read of the log, if there is one.
    pub ops: usize,
    /// Writes without an answer whose token and writer the log does not hold: they took no
    /// effect, so they cannot change the answer and are left out of the search.
    pub unknown_left_out: usize,
    /// What the search found.
    pub search: Search,
    /// The blocked operation, described, when the history is not linearizable.
    pub blocked: Option<String>,
}

impl RegisterCheck {
    /// Whether the history was shown linearizable.
    pub fn is_linearizable(&self) -> bool {
        self.search.is_linearizable()
    }
}

/// Checks one name's fenced writes (and its final log, if read) against the fence `rule`.
pub(super) fn check(
    name: &str,
    writes: &[&FencedWrite],
    log: Option<&[LogEntry]>,
    rule: FenceRule,
) -> RegisterCheck {
    let logged: HashSet<(u64, u32)> = log
        .unwrap_or_default()
        .iter()
        .map(|e| (e.token, e.process))
        .collect();
    let mut ops: Vec<Timed<RegisterOp>> = Vec::with_capacity(writes.len() + 1);
    let mut described: Vec<&FencedWrite> = Vec::with_capacity(writes.len());
    let mut left_out = 0;
    for w in writes {
        let (outcome, return_ns) = match w.outcome {
            WriteOutcome::Accepted { at_ns } => (Outcome::Accepted, Some(at_ns)),
            WriteOutcome::Rejected { at_ns } => (Outcome::Rejected, Some(at_ns)),
            WriteOutcome::Unknown => (Outcome::Unknown, None),
        };
        if outcome == Outcome::Unknown && log.is_some() && !logged.contains(&(w.token, w.process)) {
            left_out += 1;
            continue;
        }
        ops.push(Timed {
            op: RegisterOp::Write {
                token: w.token,
                process: w.process,
                outcome,
            },
            call_ns: w.invoke_ns,
            return_ns,
        });
        described.push(w);
    }
    if log.is_some() {
        // After every recorded answer, before the writes that never answered.
        ops.push(Timed {
            op: RegisterOp::ReadLog,
            call_ns: u64::MAX - 1,
            return_ns: Some(u64::MAX - 1),
        });
    }
    let search = linearize(&FencedLog { rule, log }, &ops, SEARCH_BUDGET);
    let blocked = match search {
        Search::NotLinearizable { blocked, .. } => Some(match described.get(blocked) {
            Some(w) => format!("{w}"),
            None => format!(
                "the final read of the log ({} entries)",
                log.map_or(0, <[_]>::len)
            ),
        }),
        _ => None,
    };
    RegisterCheck {
        name: name.to_owned(),
        ops: ops.len(),
        unknown_left_out: left_out,
        search,
        blocked,
    }
}
