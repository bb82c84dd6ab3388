//! The holder of a name over N nodes, from what each node describes: which grant a quorum of
//! them carries, or that nobody holds it, or that the answers leave it open. Pure counting, no
//! I/O (the round is in `kinds/holder.rs`), so the rules are unit-tested here.
//!
//! A node's answer is one of: failed (an error or a timeout), free (no holder), or held —
//! by a grant the node's note names (`crate::record`: a Redlock grant that wrote a note), or by
//! a holder it cannot name (a grant that wrote no note yet, another client's key).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use lock_core::LockError;
use lock_core::backend::Holder;

use crate::record::{self, GrantId};
use crate::tally::{Tally, quorum};

/// What one node said it holds.
#[derive(Debug, Clone)]
struct Held {
    /// The grant its note names, if the note is a Redlock record.
    grant: Option<GrantId>,
    /// The node's remaining TTL of the key (`None`: never expires, or cannot tell).
    ttl: Option<Duration>,
    /// The caller's note in the record.
    note: Option<Arc<[u8]>>,
}

/// What the nodes' answers decide.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Described {
    /// A quorum of nodes carries one Redlock grant: its term (the Redlock lease's fencing
    /// token), the time until fewer than a quorum of its keys are left (before the caller
    /// takes off what the round took and the drift), and the note a quorum of them carries.
    Grant(Holder),
    /// More than `N − quorum` nodes hold a key (an acquire now would be busy), but no quorum
    /// carries one named grant: a holder that wrote no note (a grant that wrote none, or not
    /// yet on enough nodes; another client's key). Term 0, no note; the time until fewer than
    /// `N − quorum + 1` keys are left.
    Unnamed(Holder),
    /// A quorum of nodes holds no key: nobody holds the name.
    Nobody,
    /// Failed nodes leave it open.
    Undecided,
}

/// The answers of one read round so far.
#[derive(Debug)]
pub(crate) struct Reading {
    nodes: usize,
    quorum: usize,
    held: Vec<Held>,
    free: usize,
    failed: usize,
    /// Of `failed`, the errors retrying cannot fix.
    fatal: usize,
    first_error: Option<LockError>,
}

impl Reading {
    pub(crate) fn new(nodes: usize) -> Self {
        Self {
            nodes,
            quorum: quorum(nodes),
            held: Vec::new(),
            free: 0,
            failed: 0,
            fatal: 0,
            first_error: None,
        }
    }

    /// Counts one node's answer.
    pub(crate) fn seen(&mut self, answer: Result<Option<Holder>, LockError>) {
        match answer {
            Ok(None) => self.free += 1,
            Ok(Some(holder)) => {
                let record = holder.note.as_deref().and_then(record::open);
                self.held.push(Held {
                    grant: record.map(|(grant, _)| grant),
                    ttl: holder.ttl,
                    note: record.map(|(_, note)| Arc::from(note)),
                });
            }
            Err(error) => {
                self.failed += 1;
                if !error.is_retryable() {
                    self.fatal += 1;
                }
                self.first_error.get_or_insert(error);
            }
        }
    }

    /// Nodes not counted yet.
    #[cfg(test)]
    fn pending(&self) -> usize {
        self.nodes - self.held.len() - self.free - self.failed
    }

    /// The answer once the nodes not counted yet cannot change it: a named grant on a quorum
    /// with its note on a quorum (no other grant can then reach a quorum), or a quorum free
    /// (then no quorum can hold anything). `None` while it may still change.
    pub(crate) fn settled(&self) -> Option<Described> {
        if self.free >= self.quorum {
            return Some(Described::Nobody);
        }
        match self.decide() {
            Described::Grant(holder) if holder.note.is_some() => Some(Described::Grant(holder)),
            _ => None,
        }
    }

    /// The answer, counting the nodes not counted yet as failed:
    /// 1. a grant named by a quorum of nodes is the holder ([`Described::Grant`]);
    /// 2. else more than `N − quorum` nodes holding a key is a holder without a name
    ///    ([`Described::Unnamed`]);
    /// 3. else a quorum of free nodes is [`Described::Nobody`];
    /// 4. else [`Described::Undecided`].
    ///
    /// The cases exclude each other: a quorum free leaves at most `N − quorum` nodes holding
    /// anything, and two grants cannot each be named by a quorum (each node names at most one).
    pub(crate) fn decide(&self) -> Described {
        let mut grants: HashMap<GrantId, Vec<&Held>> = HashMap::new();
        for held in &self.held {
            if let Some(grant) = held.grant {
                grants.entry(grant).or_default().push(held);
            }
        }
        if let Some((grant, carriers)) = grants.into_iter().find(|(_, c)| c.len() >= self.quorum) {
            let ttl = keep_th_largest(carriers.iter().map(|h| h.ttl), self.quorum);
            let holder = Holder::new(grant.fence, ttl);
            return Described::Grant(match quorum_note(&carriers, self.quorum) {
                Some(note) => holder.with_note(note),
                None => holder,
            });
        }
        let busy = self.nodes - self.quorum + 1;
        if self.held.len() >= busy {
            let ttl = keep_th_largest(self.held.iter().map(|h| h.ttl), busy);
            return Described::Unnamed(Holder::new(0, ttl));
        }
        if self.free >= self.quorum {
            Described::Nobody
        } else {
            Described::Undecided
        }
    }

    /// The round's tally for a [`QuorumNotReached`](crate::QuorumNotReached): the nodes
    /// holding a key as "yes", the free ones as "no"; and the first node error.
    pub(crate) fn tally(&mut self) -> (Tally, Option<LockError>) {
        let mut tally = Tally::new(self.nodes);
        tally.yes = self.held.len();
        tally.no = self.free;
        tally.failed = self.failed;
        tally.fatal = self.fatal;
        (tally, self.first_error.take())
    }
}

/// The note that at least `quorum` of a grant's `carriers` carry, byte for byte; `None` when
/// they disagree (a new note of the grant is being written).
fn quorum_note(carriers: &[&Held], quorum: usize) -> Option<Arc<[u8]>> {
    let mut counts: HashMap<&[u8], usize> = HashMap::new();
    for note in carriers.iter().filter_map(|h| h.note.as_deref()) {
        *counts.entry(note).or_default() += 1;
    }
    counts
        .into_iter()
        .find(|(_, n)| *n >= quorum)
        .map(|(note, _)| Arc::from(note))
}

/// How long until fewer than `keep` of keys with these remaining `ttls` are left: the
/// `keep`-th largest (a key that never expires counts as the longest; `None` when the one
/// chosen is such, or there are fewer than `keep`).
fn keep_th_largest(ttls: impl Iterator<Item = Option<Duration>>, keep: usize) -> Option<Duration> {
    let mut ttls: Vec<Option<Duration>> = ttls.collect();
    ttls.sort_by_key(|t| std::cmp::Reverse(t.unwrap_or(Duration::MAX)));
    ttls.get(keep.checked_sub(1)?).copied().flatten()
}

#[cfg(test)]
mod tests {
    use lock_core::{Lease, Op, Token};
    use tokio::time::Instant;

    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn lease(fence: u64) -> Lease {
        let token = Token::generate().expect("rng");
        Lease::new("job", token, fence, Instant::now() + 10 * MS)
    }

    /// A node holding `lease`'s grant with `note` written, `ttl_ms` left.
    fn named(lease: &Lease, note: &[u8], ttl_ms: u64) -> Result<Option<Holder>, LockError> {
        Ok(Some(
            Holder::new(99, Some(Duration::from_millis(ttl_ms)))
                .with_note(record::seal(lease, note)),
        ))
    }

    /// A node holding a key it cannot name (no note, or another client's note).
    fn unnamed(ttl_ms: u64) -> Result<Option<Holder>, LockError> {
        Ok(Some(Holder::new(5, Some(Duration::from_millis(ttl_ms)))))
    }

    fn down() -> Result<Option<Holder>, LockError> {
        Err(LockError::Timeout {
            phase: lock_core::TimeoutPhase::Command,
            elapsed: MS,
        })
    }

    fn read(nodes: usize, answers: Vec<Result<Option<Holder>, LockError>>) -> Reading {
        let mut reading = Reading::new(nodes);
        for answer in answers {
            reading.seen(answer);
        }
        reading
    }

    #[test]
    fn a_quorum_names_the_grant_whatever_the_minority_says() {
        let g = lease(1_000);
        let other = lease(2_000);
        let expected = Holder::new(1_000, Some(300 * MS)).with_note(&b"pod-a"[..]);
        // 3 nodes: all agree; one down; one with another grant's key; one foreign.
        for minority in [
            named(&g, b"pod-a", 100),
            down(),
            named(&other, b"pod-b", 900),
            unnamed(900),
            Ok(None),
        ] {
            let reading = read(
                3,
                vec![named(&g, b"pod-a", 300), named(&g, b"pod-a", 400), minority],
            );
            assert_eq!(reading.decide(), Described::Grant(expected.clone()));
            assert_eq!(reading.settled(), Some(Described::Grant(expected.clone())));
        }
        // 5 nodes, two down: the third largest TTL of the three carriers.
        let reading = read(
            5,
            vec![
                down(),
                named(&g, b"pod-a", 500),
                named(&g, b"pod-a", 300),
                down(),
                named(&g, b"pod-a", 400),
            ],
        );
        assert_eq!(reading.decide(), Described::Grant(expected));
        // Settled once a quorum named it, the others pending.
        let reading = read(
            5,
            vec![named(&g, b"x", 1), named(&g, b"x", 1), named(&g, b"x", 1)],
        );
        assert_eq!(reading.pending(), 2);
        assert!(matches!(reading.settled(), Some(Described::Grant(_))));
    }

    #[test]
    fn the_note_needs_a_quorum_of_the_grants_nodes() {
        let g = lease(7);
        // A new note on one node of three: the old one is still on a quorum.
        let reading = read(
            3,
            vec![
                named(&g, b"old", 300),
                named(&g, b"old", 300),
                named(&g, b"new", 300),
            ],
        );
        let Described::Grant(holder) = reading.decide() else {
            panic!("{:?}", reading.decide())
        };
        assert_eq!(holder.note.as_deref(), Some(&b"old"[..]));
        // Split between two notes on the only two nodes up: the grant, without a note, and
        // not settled while a node may still answer.
        let reading = read(3, vec![named(&g, b"old", 300), named(&g, b"new", 300)]);
        assert_eq!(
            reading.decide(),
            Described::Grant(Holder::new(7, Some(300 * MS)))
        );
        assert_eq!(reading.settled(), None);
    }

    #[test]
    fn keys_without_a_named_quorum_are_a_holder_without_a_term() {
        let g = lease(7);
        // A grant that wrote no note; another client's keys; two grants' leftovers.
        for answers in [
            vec![unnamed(300), unnamed(200), unnamed(100)],
            vec![unnamed(300), unnamed(200), Ok(None)],
            vec![named(&g, b"a", 300), unnamed(200), Ok(None)],
            vec![named(&g, b"a", 300), named(&lease(8), b"b", 200), Ok(None)],
        ] {
            let reading = read(3, answers);
            assert_eq!(
                reading.decide(),
                Described::Unnamed(Holder::new(0, Some(200 * MS)))
            );
            assert_eq!(reading.settled(), None);
        }
        // 4 nodes (quorum 3): two keys already make an acquire busy.
        let reading = read(4, vec![unnamed(300), unnamed(200), Ok(None), Ok(None)]);
        assert_eq!(
            reading.decide(),
            Described::Unnamed(Holder::new(0, Some(200 * MS)))
        );
        // A key that never expires counts as the longest.
        let reading = read(3, vec![Ok(Some(Holder::new(0, None))), unnamed(5)]);
        assert_eq!(
            reading.decide(),
            Described::Unnamed(Holder::new(0, Some(5 * MS)))
        );
        let reading = read(
            3,
            vec![
                Ok(Some(Holder::new(0, None))),
                Ok(Some(Holder::new(0, None))),
            ],
        );
        assert_eq!(reading.decide(), Described::Unnamed(Holder::new(0, None)));
    }

    #[test]
    fn a_quorum_of_free_nodes_is_nobody_and_failures_leave_it_open() {
        let g = lease(7);
        let reading = read(3, vec![Ok(None), Ok(None)]);
        assert_eq!(reading.settled(), Some(Described::Nobody));
        let reading = read(3, vec![Ok(None), Ok(None), named(&g, b"a", 1)]);
        assert_eq!(reading.decide(), Described::Nobody);
        let reading = read(
            5,
            vec![Ok(None), Ok(None), Ok(None), unnamed(1), unnamed(1)],
        );
        assert_eq!(reading.decide(), Described::Nobody);
        // One free, one held, one down: the down node decides, so the round cannot.
        for answers in [
            vec![Ok(None), named(&g, b"a", 1), down()],
            vec![Ok(None), unnamed(1), down()],
            vec![Ok(None), down(), down()],
            vec![down(), down(), down()],
        ] {
            let mut reading = read(3, answers);
            assert_eq!(reading.decide(), Described::Undecided);
            let (tally, first) = reading.tally();
            assert_eq!(tally.failed + tally.yes + tally.no, 3);
            assert!(first.is_some());
            let error = crate::QuorumNotReached::new(Op::Acquire, &tally, first)
                .into_lock_error(!tally.fatal_blocks());
            assert!(error.is_retryable(), "{error}");
        }
    }

    #[test]
    fn every_complete_reading_of_three_is_decided_when_no_node_failed() {
        let g = lease(7);
        let h = lease(8);
        let answer = |i: usize| match i {
            0 => Ok(None),
            1 => unnamed(1),
            2 => named(&g, b"a", 1),
            _ => named(&h, b"b", 1),
        };
        for a in 0..4 {
            for b in 0..4 {
                for c in 0..4 {
                    let reading = read(3, vec![answer(a), answer(b), answer(c)]);
                    assert_ne!(reading.decide(), Described::Undecided, "{reading:?}");
                }
            }
        }
    }
}
