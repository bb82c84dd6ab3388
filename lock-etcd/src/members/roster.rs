//! [`Roster`]: which member the next request goes to, from what each member's last requests
//! came to. Pure bookkeeping (no I/O, the time passed in), so the policy is tested alone.
//!
//! The policy, after etcd's Go client (clientv3 moves to another endpoint when the one it uses
//! fails, rather than keep a list of healthy ones that may be stale):
//! - requests stick to one member, the *current* one, while it answers: the requests of one
//!   operation and the release watch meet the same member, and nothing is spread on members
//!   that may be cut off;
//! - a member whose request went unanswered (the caller's timeout, or a broken connection) is
//!   skipped for a while, and its channel is made anew before it is tried again: a connection
//!   that lived through a partition may stall on TCP's retransmission backoff long after the
//!   heal, a new one does not;
//! - a member that answered `Unavailable` (no leader, a leader change) is skipped briefly: it is
//!   reachable, and serves again once an election ends;
//! - when every member is skipped (the whole cluster restarting), the one whose skip ends
//!   first is tried, so requests go round the members and the first to come back is found.

use std::time::{Duration, Instant};

/// What one request to a member came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// An answer (whatever its gRPC status, but `Unavailable`): the member serves.
    Answered,
    /// `Unavailable`: the member is reachable but cannot serve now (no leader, say).
    Unready,
    /// No answer: the connection failed, or the caller gave up waiting.
    Unreachable,
}

/// How long a member is skipped after each kind of failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Skips {
    /// After [`Outcome::Unreachable`].
    pub(crate) unreachable: Duration,
    /// After [`Outcome::Unready`].
    pub(crate) unready: Duration,
}

/// The members' standing and the current member.
#[derive(Debug)]
pub(crate) struct Roster {
    members: Vec<Standing>,
    current: usize,
    skips: Skips,
}

#[derive(Debug, Clone, Copy)]
struct Standing {
    /// Skipped until then; `None` once it answered.
    skipped_until: Option<Instant>,
    /// Bumped when the member's channel must be made anew (it went unanswered).
    generation: u64,
}

impl Roster {
    /// `members` members (at least one), the first current, none skipped.
    pub(crate) fn new(members: usize, skips: Skips) -> Self {
        let standing = Standing {
            skipped_until: None,
            generation: 0,
        };
        Self {
            members: vec![standing; members.max(1)],
            current: 0,
            skips,
        }
    }

    /// The member the next request goes to, now the current one: the current member unless it
    /// is skipped, else the next one in order that is not, else the one whose skip ends first.
    pub(crate) fn pick(&mut self, now: Instant) -> usize {
        let count = self.members.len();
        let usable = (0..count)
            .map(|step| (self.current + step) % count)
            .find(|&i| {
                self.members[i]
                    .skipped_until
                    .is_none_or(|until| until <= now)
            });
        self.current = usable.unwrap_or_else(|| {
            (0..count)
                .min_by_key(|&i| self.members[i].skipped_until)
                .unwrap_or(0)
        });
        self.current
    }

    /// The generation of `member`'s channel: a channel of an older one is to be made anew.
    pub(crate) fn generation(&self, member: usize) -> u64 {
        self.members.get(member).map_or(0, |m| m.generation)
    }

    /// Records what a request to `member`, sent on its channel of `generation`, came to. An
    /// unanswered request on the member's current channel retires that channel; reports from
    /// a channel already retired change nothing but the skip.
    pub(crate) fn report(
        &mut self,
        member: usize,
        generation: u64,
        outcome: Outcome,
        now: Instant,
    ) {
        let skips = self.skips;
        let Some(standing) = self.members.get_mut(member) else {
            return;
        };
        match outcome {
            Outcome::Answered => standing.skipped_until = None,
            Outcome::Unready => standing.skipped_until = Some(now + skips.unready),
            Outcome::Unreachable => {
                standing.skipped_until = Some(now + skips.unreachable);
                if standing.generation == generation {
                    standing.generation += 1;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SKIPS: Skips = Skips {
        unreachable: Duration::from_secs(2),
        unready: Duration::from_millis(250),
    };

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn requests_stick_to_a_member_that_answers() {
        let now = Instant::now();
        let mut roster = Roster::new(3, SKIPS);
        for _ in 0..5 {
            let member = roster.pick(now);
            assert_eq!(member, 0);
            roster.report(member, 0, Outcome::Answered, now);
        }
    }

    #[test]
    fn an_unanswered_member_is_skipped_and_its_channel_renewed() {
        let now = Instant::now();
        let mut roster = Roster::new(3, SKIPS);
        roster.report(0, 0, Outcome::Unreachable, now);
        assert_eq!(roster.generation(0), 1, "the stalled channel is retired");
        // A second report from the retired channel does not retire the new one.
        roster.report(0, 0, Outcome::Unreachable, now);
        assert_eq!(roster.generation(0), 1);
        assert_eq!(roster.pick(now), 1);
        roster.report(1, 0, Outcome::Answered, now);
        // Once its skip is over the first member is usable again, but requests stay where
        // they are answered.
        assert_eq!(roster.pick(now + ms(2_500)), 1);
    }

    #[test]
    fn an_unready_member_is_skipped_briefly_and_keeps_its_channel() {
        let now = Instant::now();
        let mut roster = Roster::new(3, SKIPS);
        roster.report(0, 0, Outcome::Unready, now);
        assert_eq!(roster.generation(0), 0);
        assert_eq!(roster.pick(now), 1);
        roster.report(1, 0, Outcome::Unready, now);
        roster.report(2, 0, Outcome::Unreachable, now);
        // Every member skipped: the unready ones come back first.
        let next = roster.pick(now + ms(10));
        assert!(next == 0 || next == 1, "{next}");
        assert_eq!(
            roster.pick(now + ms(300)),
            next,
            "it stays current, its skip over"
        );
    }

    #[test]
    fn with_every_member_down_requests_go_round_them() {
        let start = Instant::now();
        let mut roster = Roster::new(3, SKIPS);
        let mut seen = Vec::new();
        for step in 0..6u64 {
            let now = start + ms(step * 10);
            let member = roster.pick(now);
            seen.push(member);
            roster.report(member, roster.generation(member), Outcome::Unreachable, now);
        }
        assert_eq!(seen, [0, 1, 2, 0, 1, 2]);
        // The first member to answer becomes current, and stays.
        let now = start + ms(100);
        let member = roster.pick(now);
        roster.report(member, roster.generation(member), Outcome::Answered, now);
        assert_eq!(roster.pick(now), member);
        assert_eq!(roster.pick(now + ms(10)), member);
    }
}
