//! The quorum arithmetic: what N answers decide, and how long a granted lease is valid.
//!
//! Pure functions and counters, no I/O, so the rules are unit-tested here exhaustively.

use std::time::Duration;

/// The quorum of `nodes` nodes: a strict majority, `nodes / 2 + 1` (1 of 1, 2 of 2, 2 of 3,
/// 3 of 4, 3 of 5). Two quorums of the same nodes always share at least one node, which is what
/// makes two simultaneous grants impossible while every node keeps its keys.
#[must_use]
pub const fn quorum(nodes: usize) -> usize {
    nodes / 2 + 1
}

/// What a round over N nodes has heard so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Tally {
    pub(crate) nodes: usize,
    pub(crate) quorum: usize,
    /// Nodes that said yes: granted, extended or released.
    pub(crate) yes: usize,
    /// Nodes that said no: busy (held by another holder) or "not ours".
    pub(crate) no: usize,
    /// Nodes that failed: an error or a timeout.
    pub(crate) failed: usize,
    /// Of `failed`, those whose error retrying cannot fix (a wrong password, a wrong-type key).
    pub(crate) fatal: usize,
}

/// The outcome of a round, once it is known whatever the nodes still pending say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    /// At least a quorum said yes.
    Quorum,
    /// Too few said yes, and too few are left to make a quorum.
    NoQuorum,
}

impl Tally {
    pub(crate) fn new(nodes: usize) -> Self {
        Self {
            nodes,
            quorum: quorum(nodes),
            yes: 0,
            no: 0,
            failed: 0,
            fatal: 0,
        }
    }

    /// Nodes that have not answered yet.
    pub(crate) fn pending(&self) -> usize {
        self.nodes
            .saturating_sub(self.yes)
            .saturating_sub(self.no)
            .saturating_sub(self.failed)
    }

    /// Whether too few nodes are left to make a quorum, whatever they say.
    pub(crate) fn quorum_impossible(&self) -> bool {
        self.yes + self.pending() < self.quorum
    }

    /// The outcome, as soon as neither it nor its kind depends on the pending nodes; `None`
    /// before. A failure's kind is settled when the refusals already rule out a quorum (busy /
    /// not ours), or could not even if every pending node refused (the failures are to blame):
    /// so one node down never turns a busy lock into an error, at the cost of waiting for the
    /// nodes that may still refuse (each bounded by the node timeout).
    pub(crate) fn decide(&self) -> Option<Decision> {
        if self.yes >= self.quorum {
            Some(Decision::Quorum)
        } else if self.quorum_impossible()
            && (self.refusals_block() || self.no + self.pending() <= self.nodes - self.quorum)
        {
            Some(Decision::NoQuorum)
        } else {
            None
        }
    }

    /// Whether the refusals alone rule out a quorum: even had every failed and pending node said
    /// yes, too many said no. A failed acquire is then "busy" (the lock is held), a failed
    /// release or extend "not ours" (the lease is gone); otherwise the failures are to blame.
    pub(crate) fn refusals_block(&self) -> bool {
        self.no > self.nodes - self.quorum
    }

    /// Whether the non-retryable failures alone rule out a quorum, so retrying cannot help.
    pub(crate) fn fatal_blocks(&self) -> bool {
        self.fatal > self.nodes - self.quorum
    }
}

/// The time a lease granted after `elapsed` is safe to use: `ttl − elapsed − drift`, or `None`
/// when that is zero or less. Saturating: never panics, whatever the inputs.
pub(crate) fn validity(ttl: Duration, drift: Duration, elapsed: Duration) -> Option<Duration> {
    ttl.checked_sub(drift)?
        .checked_sub(elapsed)
        .filter(|v| !v.is_zero())
}

/// The drift allowance for `ttl`: `ttl × factor + constant`, saturating. `factor` is checked to
/// be finite and in `[0, 1)` when the `Redlock` is built.
pub(crate) fn drift(ttl: Duration, factor: f64, constant: Duration) -> Duration {
    Duration::try_from_secs_f64(ttl.as_secs_f64() * factor)
        .unwrap_or(ttl)
        .saturating_add(constant)
}

/// The sleep cap to report with a busy answer: how long until enough of the busy nodes' keys
/// expire that the busy nodes alone no longer rule out a quorum. That is the `k`-th smallest
/// holder TTL with `k = busy − (nodes − quorum)` (with every node busy: the quorum-th smallest).
/// `None` (a key that never expires, or a node that cannot tell) counts as longest; `None` is
/// returned when the chosen one is such.
pub(crate) fn holder_ttl(
    mut ttls: Vec<Option<Duration>>,
    nodes: usize,
    quorum: usize,
) -> Option<Duration> {
    let k = ttls.len().checked_sub(nodes - quorum)?.checked_sub(1)?;
    ttls.sort_by_key(|t| t.unwrap_or(Duration::MAX));
    ttls.get(k).copied().flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn quorum_is_a_strict_majority() {
        let expected = [
            (1, 1),
            (2, 2),
            (3, 2),
            (4, 3),
            (5, 3),
            (6, 4),
            (7, 4),
            (9, 5),
        ];
        for (n, q) in expected {
            assert_eq!(quorum(n), q, "N = {n}");
            // Any two quorums intersect.
            assert!(2 * quorum(n) > n);
        }
    }

    fn tally(nodes: usize, yes: usize, no: usize, failed: usize) -> Tally {
        Tally {
            yes,
            no,
            failed,
            ..Tally::new(nodes)
        }
    }

    #[test]
    fn decides_as_soon_as_the_pending_nodes_cannot_change_it() {
        // N = 5, quorum 3.
        assert_eq!(tally(5, 0, 0, 0).decide(), None);
        assert_eq!(tally(5, 2, 0, 0).decide(), None);
        assert_eq!(tally(5, 3, 0, 0).decide(), Some(Decision::Quorum));
        assert_eq!(tally(5, 3, 2, 0).decide(), Some(Decision::Quorum));
        assert_eq!(tally(5, 2, 2, 0).decide(), None); // the last one decides
        assert_eq!(tally(5, 0, 3, 0).decide(), Some(Decision::NoQuorum));
        assert_eq!(tally(5, 1, 1, 2).decide(), Some(Decision::NoQuorum));
        assert_eq!(tally(5, 2, 1, 2).decide(), Some(Decision::NoQuorum));
        // N = 3, one busy, one down: no quorum, but busy or failed depends on the third.
        assert!(tally(3, 0, 1, 1).quorum_impossible());
        assert_eq!(tally(3, 0, 1, 1).decide(), None);
        assert_eq!(tally(3, 0, 2, 1).decide(), Some(Decision::NoQuorum));
        assert_eq!(tally(3, 0, 1, 2).decide(), Some(Decision::NoQuorum));
        // N = 5, one busy, two failed: the two pending refusing would make three, which blocks.
        assert_eq!(tally(5, 0, 1, 2).decide(), None);
        assert_eq!(tally(5, 0, 0, 3).decide(), Some(Decision::NoQuorum));
        // N = 1.
        assert_eq!(tally(1, 0, 0, 0).decide(), None);
        assert_eq!(tally(1, 1, 0, 0).decide(), Some(Decision::Quorum));
        assert_eq!(tally(1, 0, 0, 1).decide(), Some(Decision::NoQuorum));
        // N = 4, quorum 3: a 2–2 split is no quorum.
        assert_eq!(tally(4, 2, 2, 0).decide(), Some(Decision::NoQuorum));
    }

    #[test]
    fn every_complete_tally_is_decided() {
        for n in 1..=7 {
            for yes in 0..=n {
                for no in 0..=n - yes {
                    let t = tally(n, yes, no, n - yes - no);
                    assert_eq!(t.pending(), 0);
                    let d = t.decide().expect("decided once all answered");
                    assert_eq!(d == Decision::Quorum, yes >= quorum(n));
                }
            }
        }
    }

    #[test]
    fn refusals_block_only_when_failures_could_not_have_helped() {
        assert!(tally(5, 0, 3, 0).refusals_block());
        assert!(!tally(5, 1, 2, 2).refusals_block()); // the two failures might have said yes
        assert!(tally(4, 2, 2, 0).refusals_block()); // a split: contention, not failure
        assert!(tally(3, 1, 2, 0).refusals_block());
        assert!(!tally(1, 0, 0, 1).refusals_block());
        assert!(tally(1, 0, 1, 0).refusals_block());
    }

    #[test]
    fn validity_saturates_and_is_never_zero() {
        assert_eq!(validity(10_000 * MS, 102 * MS, 30 * MS), Some(9_868 * MS));
        assert_eq!(validity(10 * MS, 2 * MS, 8 * MS), None); // exactly used up
        assert_eq!(validity(10 * MS, 2 * MS, 9 * MS), None);
        assert_eq!(validity(MS, 2 * MS, Duration::ZERO), None); // drift above the TTL
        assert_eq!(
            validity(Duration::ZERO, Duration::ZERO, Duration::ZERO),
            None
        );
        assert_eq!(validity(Duration::MAX, Duration::MAX, Duration::MAX), None);
        assert_eq!(
            validity(Duration::MAX, Duration::ZERO, Duration::ZERO),
            Some(Duration::MAX)
        );
    }

    #[test]
    fn drift_is_one_percent_plus_two_ms_by_default() {
        assert_eq!(drift(10_000 * MS, 0.01, 2 * MS), 102 * MS);
        assert_eq!(drift(MS, 0.01, 2 * MS), Duration::from_micros(2_010));
        assert_eq!(drift(Duration::ZERO, 0.01, 2 * MS), 2 * MS);
        let max = lock_core::MAX_TTL;
        let d = drift(max, 0.01, 2 * MS);
        assert!(d > max / 101 && d < max / 99, "{d:?}");
        assert_eq!(drift(Duration::MAX, 0.5, Duration::MAX), Duration::MAX);
    }

    #[test]
    fn holder_ttl_is_when_the_busy_nodes_stop_blocking() {
        let ttls = |v: &[u64]| {
            v.iter()
                .map(|&m| Some(Duration::from_millis(m)))
                .collect::<Vec<_>>()
        };
        // Five busy of five: the quorum-th (3rd) smallest.
        assert_eq!(holder_ttl(ttls(&[50, 10, 40, 20, 30]), 5, 3), Some(30 * MS));
        // Three busy of five: the first to expire unblocks.
        assert_eq!(holder_ttl(ttls(&[50, 10, 40]), 5, 3), Some(10 * MS));
        // Four busy of five: the second.
        assert_eq!(holder_ttl(ttls(&[50, 10, 40, 20]), 5, 3), Some(20 * MS));
        // A key without expiry counts as the longest.
        assert_eq!(
            holder_ttl(vec![None, Some(10 * MS), Some(20 * MS)], 3, 2),
            Some(20 * MS)
        );
        assert_eq!(holder_ttl(vec![None, None, Some(20 * MS)], 3, 2), None);
        // Too few busy to block: no cap to report.
        assert_eq!(holder_ttl(ttls(&[10, 20]), 5, 3), None);
        assert_eq!(holder_ttl(Vec::new(), 1, 1), None);
        assert_eq!(holder_ttl(ttls(&[7]), 1, 1), Some(7 * MS));
    }
}
