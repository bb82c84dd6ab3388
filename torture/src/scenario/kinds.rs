//! The lock kinds — read-write, semaphore, fair — under each backend's own faults, beside the
//! PostgreSQL ones (`pg_kinds`): on one Redis (the holder partitioned past its lease, then
//! paused past it), on MariaDB (a crash and restart, then a paused holder) and on etcd (the
//! leader killed and restarted, then a paused holder). The workers take the kind through the
//! same `Locker` calls on every backend; the checker judges exclusion per kind (a writer or a
//! fair holder beside anyone; never more permit holders than permits) and the fenced log.

use std::time::Duration;

use super::{Bound, ETCD_TTL, Expected, Scenario, TTL, Topology, base, etcd, etcd_exclusion, ms};
use crate::schedule::{Net, Step, Target};
use crate::worker::Workload;

/// Which backend's faults a kind scenario runs under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KindsOn {
    /// One Redis: the holder partitioned from it past its lease, then paused past it.
    Redis,
    /// MariaDB's lease table: the server killed and restarted on its data, then a paused
    /// holder.
    Mysql,
    /// A 3-member etcd: the leader killed and restarted on its data, then a paused holder.
    Etcd,
}

/// The scenario of `workload` under `on`'s faults: 4 workers for the shared kinds (30 %
/// writers; 2 permits), 3 for the fair lock.
pub fn kinds_on(on: KindsOn, workload: Workload) -> Scenario {
    let (name, workers) = name_of(on, workload);
    let ttl = if on == KindsOn::Etcd { ETCD_TTL } else { TTL };
    // A successor's write shows that a paused writer's lease ended; permit holders write
    // nothing, so the semaphore's cycle waits for the paused lease to run out instead.
    let after_pause = match workload {
        Workload::Semaphore { .. } => Step::Sleep(ms(500)),
        _ => Step::AwaitNewerWrite,
    };
    let mut cycle = fault(on);
    cycle.extend([
        Step::AwaitGrant,
        Step::PauseHolder,
        Step::Sleep(ttl + ms(200)),
        after_pause,
        Step::ResumeHolder,
        Step::Sleep(ms(1_000)),
    ]);
    let expected = expected(on, workload);
    let scenario = Scenario {
        workload,
        workers,
        hold: (ms(150), ms(400)),
        short: Duration::from_secs(14),
        ..base(name, fault_words(on, workload), cycle, expected)
    };
    match on {
        KindsOn::Redis => scenario,
        KindsOn::Mysql => Scenario {
            topology: Topology::Mysql,
            ..scenario
        },
        KindsOn::Etcd => Scenario {
            short: Duration::from_secs(20),
            ..etcd(scenario)
        },
    }
}

/// The scenario's name, and its worker count.
fn name_of(on: KindsOn, workload: Workload) -> (&'static str, u32) {
    match (on, workload) {
        (KindsOn::Redis, Workload::ReadWrite { .. }) => ("redis-read-write", 4),
        (KindsOn::Redis, Workload::Semaphore { .. }) => ("redis-semaphore", 4),
        (KindsOn::Redis, _) => ("redis-fair", 3),
        (KindsOn::Mysql, Workload::ReadWrite { .. }) => ("mysql-read-write", 4),
        (KindsOn::Mysql, Workload::Semaphore { .. }) => ("mysql-semaphore", 4),
        (KindsOn::Mysql, _) => ("mysql-fair", 3),
        (KindsOn::Etcd, Workload::ReadWrite { .. }) => ("etcd-read-write", 4),
        (KindsOn::Etcd, Workload::Semaphore { .. }) => ("etcd-semaphore", 4),
        (KindsOn::Etcd, _) => ("etcd-fair", 3),
    }
}

/// The backend's own fault, the first half of each cycle.
fn fault(on: KindsOn) -> Vec<Step> {
    match on {
        KindsOn::Redis => vec![
            Step::AwaitGrant,
            Step::Net(Target::Holder, Net::Partition),
            Step::Sleep(ms(2_000)),
            Step::Net(Target::Holder, Net::Heal),
            Step::Sleep(ms(1_500)),
        ],
        KindsOn::Mysql => vec![
            Step::StopMysql,
            Step::Sleep(ms(300)),
            Step::StartMysql,
            Step::Sleep(ms(2_000)),
        ],
        KindsOn::Etcd => vec![
            Step::KillEtcdLeader,
            Step::AwaitEtcdLeader,
            Step::Sleep(ms(2_000)),
            Step::RestartEtcdMember,
            Step::Sleep(ms(2_000)),
        ],
    }
}

/// The fault, in a few words.
fn fault_words(on: KindsOn, workload: Workload) -> &'static str {
    let kind = match workload {
        Workload::ReadWrite { .. } => 0,
        Workload::Semaphore { .. } => 1,
        _ => 2,
    };
    let words: [[&str; 3]; 3] = [
        [
            "read-write lock (30 % writes): holder partitioned past its lease, paused holder",
            "semaphore of 2 permits: holder partitioned past its lease, paused holder",
            "fair lock: holder partitioned past its lease, paused holder",
        ],
        [
            "read-write lock (30 % writes): MariaDB killed and restarted, paused holder",
            "semaphore of 2 permits: MariaDB killed and restarted, paused holder",
            "fair lock: MariaDB killed and restarted, paused holder",
        ],
        [
            "read-write lock (30 % writes): etcd leader killed and restarted, paused holder",
            "semaphore of 2 permits: etcd leader killed and restarted, paused holder",
            "fair lock: etcd leader killed and restarted, paused holder",
        ],
    ];
    let on = match on {
        KindsOn::Redis => 0,
        KindsOn::Mysql => 1,
        KindsOn::Etcd => 2,
    };
    words[on][kind]
}

/// Exclusion per kind; every fair grant writes, so the resumed fair holder's write is always
/// stale and refused.
fn expected(on: KindsOn, workload: Workload) -> Expected {
    let why = "every kind's grant expires on the store's clock and is renewed only by its \
               holder: a holder cut off or paused past its lease stops at its own valid_until, \
               which is never later, and a writer's or fair holder's late write carries an \
               older token than its successor's";
    let expected = match on {
        KindsOn::Etcd => etcd_exclusion(why),
        KindsOn::Redis | KindsOn::Mysql => Expected::exclusion(TTL, why),
    };
    match workload {
        Workload::Fair => Expected {
            stale_rejected: Bound::AtLeastOne,
            ..expected
        },
        _ => expected,
    }
}

/// Every kind scenario of the three backends, nine in all.
pub fn kinds_scenarios() -> Vec<Scenario> {
    let workloads = [
        Workload::ReadWrite { write_percent: 30 },
        Workload::Semaphore { max: 2 },
        Workload::Fair,
    ];
    [KindsOn::Redis, KindsOn::Mysql, KindsOn::Etcd]
        .into_iter()
        .flat_map(|on| workloads.map(|w| kinds_on(on, w)))
        .collect()
}
