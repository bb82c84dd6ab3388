//! The lock kinds — read-write, semaphore, fair, the multi-lock — under each backend's own
//! faults, beside the PostgreSQL ones (`pg_kinds`): on one Redis (the holder partitioned past
//! its lease, then paused past it), on MariaDB (a crash and restart, then a paused holder) and
//! on etcd (the leader killed and restarted, then a paused holder). The workers take the kind
//! through the same `Locker` calls on every backend; the checker judges exclusion per kind (a
//! writer or a fair holder beside anyone; never more permit holders than permits; a multi-lock
//! holder beside no one on each of its names) and the fenced log (per name for the multi-lock).

use std::time::Duration;

use super::{
    Bound, ETCD_TTL, Expected, Scenario, TTL, Topology, base, etcd, etcd_exclusion, ms,
    paused_holder,
};
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
/// writers; 2 permits), 3 for the fair lock and the multi-lock (2 of 3 names).
pub fn kinds_on(on: KindsOn, workload: Workload) -> Scenario {
    let (name, workers) = name_of(on, workload);
    let ttl = if on == KindsOn::Etcd { ETCD_TTL } else { TTL };
    let mut cycle = fault(on);
    cycle.extend(paused_holder(workload, ttl));
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
        (KindsOn::Redis, Workload::Multi { .. }) => ("redis-multi", 3),
        (KindsOn::Redis, _) => ("redis-fair", 3),
        (KindsOn::Mysql, Workload::ReadWrite { .. }) => ("mysql-read-write", 4),
        (KindsOn::Mysql, Workload::Semaphore { .. }) => ("mysql-semaphore", 4),
        (KindsOn::Mysql, Workload::Multi { .. }) => ("mysql-multi", 3),
        (KindsOn::Mysql, _) => ("mysql-fair", 3),
        (KindsOn::Etcd, Workload::ReadWrite { .. }) => ("etcd-read-write", 4),
        (KindsOn::Etcd, Workload::Semaphore { .. }) => ("etcd-semaphore", 4),
        (KindsOn::Etcd, Workload::Multi { .. }) => ("etcd-multi", 3),
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
        Workload::Multi { .. } => 3,
        _ => 2,
    };
    let words: [[&str; 4]; 3] = [
        [
            "read-write lock (30 % writes): holder partitioned past its lease, paused holder",
            "semaphore of 2 permits: holder partitioned past its lease, paused holder",
            "fair lock: holder partitioned past its lease, paused holder",
            "multi-lock (2 of 3 names): holder partitioned past its lease, paused holder",
        ],
        [
            "read-write lock (30 % writes): MariaDB killed and restarted, paused holder",
            "semaphore of 2 permits: MariaDB killed and restarted, paused holder",
            "fair lock: MariaDB killed and restarted, paused holder",
            "multi-lock (2 of 3 names): MariaDB killed and restarted, paused holder",
        ],
        [
            "read-write lock (30 % writes): etcd leader killed and restarted, paused holder",
            "semaphore of 2 permits: etcd leader killed and restarted, paused holder",
            "fair lock: etcd leader killed and restarted, paused holder",
            "multi-lock (2 of 3 names): etcd leader killed and restarted, paused holder",
        ],
    ];
    let on = match on {
        KindsOn::Redis => 0,
        KindsOn::Mysql => 1,
        KindsOn::Etcd => 2,
    };
    words[on][kind]
}

/// Exclusion per kind; every fair and multi-lock grant writes, so the resumed holder's write
/// is always stale and refused.
fn expected(on: KindsOn, workload: Workload) -> Expected {
    let why = match workload {
        Workload::Multi { .. } => MULTI_WHY,
        _ => {
            "every kind's grant expires on the store's clock and is renewed only by its \
             holder: a holder cut off or paused past its lease stops at its own valid_until, \
             which is never later, and a writer's or fair holder's late write carries an \
             older token than its successor's"
        }
    };
    let expected = match on {
        KindsOn::Etcd => etcd_exclusion(why),
        KindsOn::Redis | KindsOn::Mysql => Expected::exclusion(TTL, why),
    };
    match workload {
        Workload::Fair | Workload::Multi { .. } => Expected {
            stale_rejected: Bound::AtLeastOne,
            ..expected
        },
        _ => expected,
    }
}

/// Why the multi-lock keeps exclusion per name under every backend's faults.
pub(super) const MULTI_WHY: &str = "each name of a multi-lock is a mutex grant of its own, \
    taken all or nothing and renewed only by its holder: a holder cut off or paused past its \
    leases stops at the earliest valid_until, and its late write on the name its successor \
    shares carries an older token than the successor's";

/// The multi-lock of the kind scenarios: 2 of 3 names a round.
pub const MULTI: Workload = Workload::Multi { names: 3 };

/// Every kind scenario of the three backends, twelve in all.
pub fn kinds_scenarios() -> Vec<Scenario> {
    let workloads = [
        Workload::ReadWrite { write_percent: 30 },
        Workload::Semaphore { max: 2 },
        Workload::Fair,
        MULTI,
    ];
    [KindsOn::Redis, KindsOn::Mysql, KindsOn::Etcd]
        .into_iter()
        .flat_map(|on| workloads.map(|w| kinds_on(on, w)))
        .collect()
}
