//! The clock scenarios (`--scenario clock`): servers' and clients' clocks that jump and run
//! fast, with libfaketime (lock-testkit's `FakeClock`) and, for etcd, Linux time namespaces.
//!
//! Where a lock's expiry is counted on a clock that a fault moves, no lock can keep exclusion:
//! the server forgets a lease its holder still believes in, and nothing the holder can observe
//! tells it so. Those scenarios expect overlaps to be possible and judge only what fencing
//! must still save (no stale write accepted); the others expect exclusion.
//!
//! Redlock's fencing token is the largest of its quorum's node tokens, each the larger of the
//! node's clock in µs and its counter + 1: a node whose clock runs ahead issues tokens ahead of
//! the others', so a later grant on a quorum without it can carry a smaller token. Those
//! regressions are reported, not judged, in the Redlock clock scenarios: the fence then refuses
//! that holder's writes (it costs liveness, never safety). A single Redis and PostgreSQL keep
//! their counter, so their tokens grow across both jumps.

use std::time::Duration;

use distlock::redlock::DEFAULT_DRIFT_FACTOR;

use super::{
    Bound, ETCD_TTL, Expected, Scenario, TTL, base, etcd, etcd_exclusion, ms, postgres, redlock,
};
use crate::schedule::{ClockOf, Net, Step, Target};

/// Whose clocks a scenario runs on libfaketime.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Clocks {
    /// Every process on the machine's clock.
    #[default]
    Real,
    /// Every lock server (each Redis, the PostgreSQL) and every worker on a libfaketime clock
    /// of its own (wall clock only, at real speed) that the clock steps move; the resource's
    /// servers stay on the machine's clock.
    Faked,
    /// As [`Clocks::Faked`], but lock server `node` runs `rate` times as fast as the real
    /// clock, every clock of it (its oscillator is fast), from its start.
    Fast {
        /// The fast server.
        node: usize,
        /// Its rate (`1.1`: 10 % fast).
        rate: f64,
    },
}

/// How far a server's clock jumps forward: well past the lease, so every key it holds expires
/// at once.
const JUMP: Duration = Duration::from_secs(3);

fn jump_ms() -> i64 {
    i64::try_from(JUMP.as_millis()).unwrap_or(i64::MAX)
}

/// The cycle of the single-server jumps (Redis, PostgreSQL): wait for a grant, the server's
/// wall clock forward past the lease while it is held, 1.5 s, back, 1.5 s.
fn server_jump_cycle() -> Vec<Step> {
    vec![
        Step::AwaitGrant,
        Step::ClockJump {
            of: ClockOf::Node(0),
            by_ms: jump_ms(),
        },
        Step::Sleep(ms(1_500)),
        Step::ClockBack(ClockOf::Node(0)),
        Step::Sleep(ms(1_500)),
    ]
}

/// The clock scenarios, in the order `--scenario clock` runs them.
pub fn clock_scenarios() -> Vec<Scenario> {
    vec![
        clock_redis_jump(),
        clock_redlock_fast(2),
        clock_redlock_fast(10),
        clock_redlock_jump(),
        clock_client_jump(),
        clock_pg_jump(),
        clock_etcd_monotonic(),
    ]
}

/// The recovery bound of a server clock jump forward and back: a key (or lease row) written
/// while the clock was ahead outlives the jump back by the jump, if nobody releases it.
fn after_jump_back(ttl: Duration) -> Duration {
    ttl + JUMP + Duration::from_secs(1)
}

/// Overlaps may happen (the fault moves the clock the expiry counts on); fencing must keep
/// every stale write out, and tokens must keep growing.
fn fenced(ttl: Duration, why: &'static str) -> Expected {
    Expected {
        recovery_within: after_jump_back(ttl),
        ..Expected::fenced_only(ttl, why)
    }
}

/// A single Redis's wall clock jumps 3 s forward while a worker holds a 1 s lease, and back
/// 1.5 s later.
pub fn clock_redis_jump() -> Scenario {
    Scenario {
        clocks: Clocks::Faked,
        // Long holds: the jump lands mid-section. Short waits: the others try again within
        // 250 ms instead of sleeping out the TTL they read before the jump.
        hold: (ms(600), ms(1_000)),
        wait: ms(250),
        short: Duration::from_secs(8),
        ..base(
            "clock-redis-jump",
            "Redis's wall clock jumps 3 s forward while a worker holds (lease 1 s); back 1.5 s later",
            server_jump_cycle(),
            fenced(
                TTL,
                "Redis expires keys on its wall clock: the jump expires the held key at once and \
                 the next worker is granted it while the holder's lease (counted on its own \
                 monotonic clock) still runs; no client can see the server's clock move; the \
                 successor's token is larger (the server's clock, or the counter + 1), so \
                 fencing refuses the old holder's late writes",
            ),
        )
    }
}

/// One of five Redlock nodes runs `times` × the drift allowance fast (the drift factor 1 %:
/// 2 % or 10 % fast); the holder is stopped on a bare quorum that includes it.
pub fn clock_redlock_fast(times: u32) -> Scenario {
    let (name, fault) = match times {
        2 => (
            "clock-redlock-drift-2x",
            "node 2 runs 2 % fast (2× the drift factor); holder on {0, 1, 2} SIGSTOPped",
        ),
        _ => (
            "clock-redlock-drift-10x",
            "node 2 runs 10 % fast (10× the drift factor); holder on {0, 1, 2} SIGSTOPped",
        ),
    };
    Scenario {
        clocks: Clocks::Fast {
            node: 2,
            rate: 1.0 + f64::from(times) * DEFAULT_DRIFT_FACTOR,
        },
        hold: (ms(600), ms(1_000)),
        wait: ms(250),
        // One holder and one contender, as in redlock-restart-empty: two contenders split
        // the free nodes' votes.
        workers: 2,
        short: Duration::from_secs(9),
        ..redlock(base(
            name,
            fault,
            vec![
                Step::Net(Target::Nodes(vec![3, 4]), Net::Partition),
                Step::Sleep(TTL + ms(300)),
                Step::AwaitGrant,
                Step::PauseHolder,
                Step::Net(Target::Nodes(vec![3, 4]), Net::Heal),
                Step::Sleep(TTL + ms(200)),
                Step::AwaitNewerWrite,
                Step::ResumeHolder,
                Step::Sleep(ms(800)),
            ],
            Expected {
                stale_rejected: Bound::AtLeastOne,
                token_regressions: Bound::Any,
                ..Expected::fenced_only(
                    TTL,
                    "Redlock subtracts a drift allowance of 1 % of the TTL + 2 ms from the \
                     validity; a node whose clock runs faster forgets the stopped holder's key \
                     before the holder's validity ends, and with the two nodes it never had it \
                     forms a second quorum (at 2 %, a window of about 8 ms; at 10 %, about \
                     80 ms); fencing refuses the resumed holder's writes",
                )
            },
        ))
    }
}

/// Kleppmann's example: the holder has a bare quorum {0, 1, 2} (nodes 3 and 4 cut off from
/// it, not from the contender); node 2's clock jumps past the lease.
pub fn clock_redlock_jump() -> Scenario {
    let three_four = || vec![3, 4];
    Scenario {
        clocks: Clocks::Faked,
        // Holds across the jump; the contender retries every 250 ms.
        hold: (ms(1_500), ms(2_500)),
        wait: ms(250),
        workers: 2,
        short: Duration::from_secs(9),
        ..redlock(base(
            "clock-redlock-jump",
            "holder on a bare quorum {0, 1, 2} (3, 4 cut off from it); node 2's wall clock jumps \
             3 s forward; back later",
            vec![
                Step::Net(Target::Nodes(three_four()), Net::Partition),
                Step::Sleep(TTL + ms(300)),
                Step::AwaitGrant,
                // The contender reaches 3 and 4 again (and reconnects) while the holder, cut
                // off from them, cannot extend its lease onto them (lock-redlock's repair).
                Step::Net(Target::Others(three_four()), Net::Heal),
                Step::Sleep(ms(500)),
                Step::ClockJump {
                    of: ClockOf::Node(2),
                    by_ms: jump_ms(),
                },
                Step::Sleep(ms(1_500)),
                Step::Net(Target::Nodes(three_four()), Net::Heal),
                Step::ClockBack(ClockOf::Node(2)),
                Step::Sleep(ms(1_500)),
            ],
            Expected {
                token_regressions: Bound::Any,
                ..fenced(
                    TTL,
                    "node 2 expires the holder's key at the jump, and {2, 3, 4} is a second \
                     quorum while the holder's validity runs (Kleppmann 2016): Redlock's safety \
                     rests on clocks that neither jump nor drift beyond the allowance; fencing \
                     refuses the old holder's late writes",
                )
            },
        ))
    }
}

/// Every worker's wall clock jumps 5 s forward, 10 s back and forward again, three times a
/// cycle, while they take, renew and release a Redlock.
pub fn clock_client_jump() -> Scenario {
    let jumps = |by_ms: i64| Step::ClockJump {
        of: ClockOf::Workers,
        by_ms,
    };
    let mut cycle = vec![Step::AwaitGrant];
    for _ in 0..3 {
        cycle.extend([
            jumps(5_000),
            Step::Sleep(ms(150)),
            jumps(-10_000),
            Step::Sleep(ms(150)),
            jumps(5_000),
            Step::Sleep(ms(150)),
        ]);
    }
    cycle.extend([Step::ClockBack(ClockOf::Workers), Step::Sleep(ms(1_000))]);
    Scenario {
        clocks: Clocks::Faked,
        hold: (ms(100), ms(400)),
        short: Duration::from_secs(8),
        ..redlock(base(
            "clock-client-jump",
            "every worker's wall clock jumps +5 s, −10 s, +5 s, three times a cycle (Redlock)",
            cycle,
            Expected::exclusion(
                TTL,
                "distlock measures leases, validity, renewals and waits on the monotonic clock \
                 (Instant), which a wall-clock step does not move",
            ),
        ))
    }
}

/// PostgreSQL's wall clock (`clock_timestamp()`, which the lease table's expiries are read
/// from) jumps 3 s forward while a worker holds, and back 1.5 s later.
pub fn clock_pg_jump() -> Scenario {
    Scenario {
        clocks: Clocks::Faked,
        hold: (ms(600), ms(1_000)),
        wait: ms(250),
        short: Duration::from_secs(9),
        ..postgres(base(
            "clock-pg-jump",
            "PostgreSQL's wall clock jumps 3 s forward while a worker holds (lease 1 s); back \
             1.5 s later",
            server_jump_cycle(),
            fenced(
                TTL,
                "the lease row's expiry is the server's clock_timestamp() + TTL: the jump ends \
                 the held lease at once and the next worker is granted it while the holder's \
                 lease (its own monotonic clock) runs; tokens are max(last + 1, the clock in \
                 µs), so they keep growing both ways, and distlock_fence refuses the old \
                 holder's writes; back, a row written ahead outlives the jump unless released",
            ),
        ))
    }
}

/// etcd: the leader killed and restarted in a Linux time namespace whose monotonic clock is
/// an hour further ahead each time, so the cluster is led in turn by members whose monotonic
/// clocks are hours apart.
pub fn clock_etcd_monotonic() -> Scenario {
    Scenario {
        hold: (ms(300), ms(900)),
        short: Duration::from_secs(10),
        ..etcd(base(
            "clock-etcd-monotonic",
            "the etcd leader SIGKILLed; restarted 2 s after a new leader, its monotonic clock 1 h \
             further ahead (time namespace)",
            vec![
                Step::KillEtcdLeader,
                Step::AwaitEtcdLeader,
                // etcd-leader-kill's cycle, but for the namespace: the clients need these
                // seconds to come back (with 1 s here, and without any offset, they took up to
                // 16 s: lock-etcd's reconnect, issue 37 item 5).
                Step::Sleep(ms(2_000)),
                Step::RestartEtcdMemberAhead(Duration::from_secs(3_600)),
                Step::Sleep(ms(2_000)),
            ],
            Expected {
                recovery_within: 2 * ETCD_TTL + Duration::from_secs(2),
                ..etcd_exclusion(
                    "etcd counts a lease on the leader's monotonic clock from when that member \
                     became leader (a new leader restarts every lease's countdown), so an \
                     offset between members changes no expiry; its wall clock cannot be moved \
                     here (Go reads it through the vDSO, past LD_PRELOAD, and no namespace \
                     offsets CLOCK_REALTIME), and etcd's leases do not read it",
                )
            },
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::Topology;

    #[test]
    fn every_clock_scenario_is_named_clock_and_fakes_what_its_steps_move() {
        for s in clock_scenarios() {
            assert!(s.name.starts_with("clock-"), "{}", s.name);
            let moves_a_clock = s
                .cycle
                .iter()
                .any(|step| matches!(step, Step::ClockJump { .. } | Step::ClockBack(_)));
            assert!(
                !moves_a_clock || s.clocks == Clocks::Faked,
                "{} moves a clock it does not fake",
                s.name
            );
            assert_eq!(s.expected.stale_accepted, Bound::Zero, "{}", s.name);
        }
        assert_eq!(
            clock_etcd_monotonic().topology,
            Topology::Etcd,
            "the etcd scenario runs on etcd"
        );
    }
}
