//! The history checker: judges a recorded history of lock grants and fenced writes, from any
//! number of processes, by what the lock and the fence promise.
//!
//! A history is what the processes recorded, Jepsen-style, on one clock (ns):
//!
//! - [`Hold`]s: each grant, from its arrival to the end of its *valid* lease (the release
//!   being sent or the lease's `valid_until`, whichever came first), with its fencing token
//!   and what it shares ([`Share`]);
//! - [`FencedWrite`]s: each write to the fenced resource, invoked at one time and answered
//!   `ok` (accepted) or `fail` (refused as stale) at another, or never answered (a timeout, a
//!   crash: `info` in Jepsen's terms, [`WriteOutcome::Unknown`] here);
//! - optionally, each name's fenced log as the resource holds it at the end ([`LogEntry`]s in
//!   the order the resource accepted them).
//!
//! [`check`] verifies, per lock name:
//!
//! - **mutual exclusion over valid leases**, per kind: no two holds open at once for more than
//!   the slack where one is exclusive (a mutex, a writer of a read-write lock, a fair holder),
//!   and no more permit holders open at once than the semaphore's permits;
//! - **fencing-token monotonicity**: every exclusive grant's token is above the tokens of every
//!   exclusive grant that arrived before it was requested;
//! - **linearizability of the fenced resource as a register**: some order of the writes (and
//!   of the final read of the log), each placed between its invocation and its answer, is one
//!   the fence's sequential specification allows: a write is accepted only with a token at
//!   least the largest accepted before it (and then appends exactly the log's next entry),
//!   refused only below it (an order fence, [`FenceRule::Order`]) or whenever its writer is
//!   not the holder (a holder's guard, [`FenceRule::Holder`]), and a write without an answer
//!   took effect once or never. The search is Wing & Gong's with Lowe's memoisation, bounded
//!   by a step budget (`search.rs`).
//!
//! What is *not* verified here: liveness (a grant after each fault: the torture runner's
//! recovery figures), and anything the history does not record (a write made without the
//! fence is invisible to it).

mod exclusion;
pub mod record;
mod register;
pub mod search;

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

pub use exclusion::Overlap;
pub use register::{RegisterCheck, SEARCH_BUDGET};
pub use search::Search;

/// What a grant lets its holder share.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Share {
    /// Alone: a mutex, the write lock of a read-write lock, a fair lock.
    #[default]
    Exclusive,
    /// A reader's share of a read-write lock: beside other readers, never beside an exclusive
    /// holder.
    Read,
    /// One permit of a semaphore of `max` permits: at most `max` holders at once.
    Permit {
        /// The semaphore's permits.
        max: u32,
    },
}

impl Share {
    /// Whether the grant excludes every other holder.
    pub fn is_exclusive(&self) -> bool {
        *self == Share::Exclusive
    }
}

/// One grant's valid lease: what the lock promised its holder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hold {
    /// The lock name.
    pub name: String,
    /// The holder (a process or worker number).
    pub process: u32,
    /// The grant's fencing token.
    pub token: u64,
    /// When the acquire was invoked, ns.
    pub requested_ns: u64,
    /// When the grant arrived, ns.
    pub start_ns: u64,
    /// When the lease stopped being valid, ns: the release being sent or its `valid_until`,
    /// whichever came first (never before `start_ns`).
    pub end_ns: u64,
    /// What it shares.
    pub share: Share,
}

/// How a fenced write ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum WriteOutcome {
    /// The resource accepted it (`ok`); the answer arrived at `at_ns`.
    Accepted {
        /// When the answer arrived, ns.
        at_ns: u64,
    },
    /// The fence refused it as stale (`fail`); the answer arrived at `at_ns`.
    Rejected {
        /// When the answer arrived, ns.
        at_ns: u64,
    },
    /// No answer (`info`): it may have taken effect at any time after its invocation, or never.
    Unknown,
}

/// One write to a fenced resource.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FencedWrite {
    /// The lock name whose fence guards the resource.
    pub name: String,
    /// The writer.
    pub process: u32,
    /// The writer's fencing token.
    pub token: u64,
    /// When it was sent, ns.
    pub invoke_ns: u64,
    /// How it ended.
    pub outcome: WriteOutcome,
}

impl fmt::Display for FencedWrite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (what, at) = match self.outcome {
            WriteOutcome::Accepted { at_ns } => ("accepted", Some(at_ns)),
            WriteOutcome::Rejected { at_ns } => ("rejected", Some(at_ns)),
            WriteOutcome::Unknown => ("unanswered", None),
        };
        write!(
            f,
            "process {}'s write with token {} on {:?}, sent at {} ns, {what}",
            self.process, self.token, self.name, self.invoke_ns
        )?;
        match at {
            Some(at) => write!(f, " at {at} ns"),
            None => Ok(()),
        }
    }
}

/// One entry of a fenced log: the token and the writer of an accepted write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct LogEntry {
    /// The write's fencing token.
    pub token: u64,
    /// Its writer.
    pub process: u32,
}

/// Which writes the fence may refuse.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum FenceRule {
    /// Exactly those whose token is below the largest accepted (an equal token is accepted):
    /// lock-redis's `FencedScript`, lock-postgres's `distlock_fence`.
    #[default]
    Order,
    /// Any whose writer no longer holds the lock, which a token at or above the largest
    /// accepted may be too (lock-etcd's `held_commit`); accepted ones still never go below.
    Holder,
}

/// A recorded history, as [`check`] takes it.
#[derive(Debug, Clone, Default)]
pub struct History {
    /// Every grant's valid lease.
    pub holds: Vec<Hold>,
    /// Every fenced write.
    pub writes: Vec<FencedWrite>,
    /// Each name's fenced log read after every process stopped, in the order the resource
    /// accepted the writes; a name without one is checked from the writes' answers alone.
    pub logs: BTreeMap<String, Vec<LogEntry>>,
    /// What the resource's fence refuses.
    pub rule: FenceRule,
    /// Overlaps up to this long are measurement noise (the timestamps are taken around, not at,
    /// the moments they describe), ns.
    pub slack_ns: u64,
}

/// What [`check`] found, over every name.
#[derive(Debug, Clone, Default)]
pub struct Verdict {
    /// Holds open at once, one of them exclusive.
    pub overlaps: Vec<Overlap>,
    /// Permit grants that arrived while as many holders as the semaphore has permits were in.
    pub over_permits: usize,
    /// The most shared holders (readers, permit holders) of one name open at once.
    pub most_shared: usize,
    /// Exclusive grants whose token did not grow.
    pub token_regressions: Vec<Hold>,
    /// The register check of each name with writes or a log.
    pub registers: Vec<RegisterCheck>,
}

impl Verdict {
    /// The register checks that did not show linearizability (not linearizable, or undecided
    /// within the budget: a verdict that cannot be reached is not a pass).
    pub fn registers_failed(&self) -> impl Iterator<Item = &RegisterCheck> {
        self.registers.iter().filter(|r| !r.is_linearizable())
    }

    /// Every rule broken, as sentences; empty when the history is correct for a lock that
    /// promises exclusion.
    pub fn violations(&self) -> Vec<String> {
        let mut out = Vec::new();
        for o in &self.overlaps {
            out.push(format!(
                "process {} (token {}) and process {} (token {}) held {:?} at once for {} ns",
                o.first.process,
                o.first.token,
                o.second.process,
                o.second.token,
                o.first.name,
                o.overlap_ns
            ));
        }
        if self.over_permits > 0 {
            out.push(format!(
                "{} permit grants beyond the semaphore's permits",
                self.over_permits
            ));
        }
        for h in &self.token_regressions {
            out.push(format!(
                "process {}'s grant of {:?} (token {}) did not grow past an earlier grant's",
                h.process, h.name, h.token
            ));
        }
        for r in self.registers_failed() {
            out.push(describe_register(r));
        }
        out
    }
}

/// One failed register check as a sentence.
pub fn describe_register(r: &RegisterCheck) -> String {
    match (&r.search, &r.blocked) {
        (Search::Undecided { steps }, _) => format!(
            "the fenced register of {:?} could not be decided within {steps} search steps",
            r.name
        ),
        (_, Some(blocked)) => format!(
            "the fenced register of {:?} is not linearizable: no order explains {blocked}",
            r.name
        ),
        _ => format!("the fenced register of {:?} is linearizable", r.name),
    }
}

/// Checks `history`: exclusion, permits, token growth and the fenced register, per name.
pub fn check(history: &History) -> Verdict {
    let mut verdict = Verdict::default();
    for holds in exclusion::by_name(&history.holds).values() {
        verdict
            .overlaps
            .extend(exclusion::overlaps(holds, history.slack_ns));
        let (most, over) = exclusion::shared(holds, history.slack_ns);
        verdict.most_shared = verdict.most_shared.max(most);
        verdict.over_permits += over;
        verdict
            .token_regressions
            .extend(exclusion::token_regressions(holds));
    }
    let mut writes: BTreeMap<&str, Vec<&FencedWrite>> = BTreeMap::new();
    for w in &history.writes {
        writes.entry(w.name.as_str()).or_default().push(w);
    }
    for name in history.logs.keys() {
        writes.entry(name.as_str()).or_default();
    }
    for (name, writes) in writes {
        let log = history.logs.get(name).map(Vec::as_slice);
        verdict
            .registers
            .push(register::check(name, &writes, log, history.rule));
    }
    verdict
}

#[cfg(test)]
mod tests;
