//! The object-storage scenarios: `ObjectStoreLock` on one SeaweedFS (S3), the fenced log an
//! object on the same server written by `lock_object_store::fenced_put`. Each worker reaches
//! the S3 endpoint, for the lock and the log alike, through a proxy of its own.

use std::time::Duration;

use super::{Bound, Expected, Scenario, TTL, Topology, base, holder_pause, ms, slow_cycle};
use crate::schedule::{Net, Step, Target};

/// `scenario` on SeaweedFS.
pub(super) fn s3(mut scenario: Scenario) -> Scenario {
    scenario.topology = Topology::ObjectStore;
    scenario
}

/// SeaweedFS killed (`SIGKILL`, a crash) and started again on its data while workers hold
/// and wait for the lock.
pub fn s3_restart() -> Scenario {
    Scenario {
        hold: (ms(300), ms(900)),
        short: Duration::from_secs(8),
        ..s3(base(
            "s3-restart",
            "SeaweedFS SIGKILLed (a crash), started again on its data 300 ms later",
            vec![
                Step::KillS3,
                Step::Sleep(ms(300)),
                Step::StartS3,
                Step::Sleep(ms(2_000)),
            ],
            Expected::exclusion(
                TTL,
                "the lock object survives the crash with its epoch; a holder that cannot renew \
                 stops at its own validity (counted from before its last write was sent), and a \
                 contender takes over only after seeing the same object version for a whole \
                 lease after the restart, by a write conditional on that version",
            ),
        ))
    }
}

/// Kleppmann's GC pause on object storage: the paused holder's late `fenced_put` meets its
/// successor's larger token in the object's metadata.
pub fn s3_holder_pause() -> Scenario {
    let mut scenario = holder_pause();
    scenario.name = "s3-holder-pause";
    s3(scenario)
}

/// Both faults in one cycle, the short form CI runs: SeaweedFS crashed and started again on
/// its data, then a holder paused past its lease and resumed after its successor wrote.
pub fn s3_restart_pause() -> Scenario {
    Scenario {
        hold: (ms(150), ms(400)),
        short: Duration::from_secs(8),
        ..s3(base(
            "s3-restart-pause",
            "SeaweedFS SIGKILLed and started again on its data, then a holder SIGSTOPped past \
             its lease and resumed after a successor wrote",
            vec![
                Step::KillS3,
                Step::Sleep(ms(300)),
                Step::StartS3,
                Step::Sleep(ms(1_000)),
                Step::AwaitGrant,
                Step::PauseHolder,
                Step::Sleep(TTL + ms(200)),
                Step::AwaitNewerWrite,
                Step::ResumeHolder,
                Step::Sleep(ms(1_000)),
            ],
            Expected {
                stale_rejected: Bound::AtLeastOne,
                ..Expected::exclusion(
                    TTL,
                    "the lock object and the log's fence token survive the crash; the paused \
                     holder's late fenced_put finds its successor's larger token in the log \
                     object's metadata and is refused",
                )
            },
        ))
    }
}

/// The holder cut off from SeaweedFS (the lock and the log object) past its lease, healed
/// once a successor has written: its writes in flight then reach the log after the
/// successor's.
pub fn s3_partition() -> Scenario {
    Scenario {
        hold: (ms(150), ms(400)),
        short: Duration::from_secs(9),
        ..s3(base(
            "s3-partition",
            "the holder partitioned from SeaweedFS (lock and log) past its lease (1 s), healed \
             after a successor wrote",
            vec![
                Step::AwaitGrant,
                Step::Net(Target::Holder, Net::Partition),
                Step::Sleep(TTL + ms(200)),
                Step::AwaitNewerWrite,
                Step::Net(Target::Holder, Net::Heal),
                Step::Sleep(ms(1_500)),
            ],
            Expected {
                stale_rejected: Bound::AtLeastOne,
                ..Expected::exclusion(
                    TTL,
                    "the cut-off holder cannot renew and stops at its own validity, counted \
                     from before its last renewal was sent; a contender takes over only after \
                     seeing the lock object unchanged for a whole lease, and the holder's \
                     write that reaches the log after the heal finds its successor's larger \
                     token in the log object's metadata",
                )
            },
        ))
    }
}

/// SeaweedFS slowed for every worker: first below the lock's request timeout (250 ms), then
/// beyond it.
pub fn s3_slow() -> Scenario {
    Scenario {
        short: Duration::from_secs(10),
        ..s3(base(
            "s3-slow",
            "60 ms then 300 ms latency each way to SeaweedFS (request timeout 250 ms)",
            slow_cycle(ms(1_500)),
            Expected::exclusion(
                TTL,
                "validity is counted from before each request, so a slow grant or renewal is a \
                 shorter lease; a request that timed out but applied later leaves a lock \
                 object no client believes it holds, which contenders take over only after a \
                 whole lease",
            ),
        ))
    }
}
