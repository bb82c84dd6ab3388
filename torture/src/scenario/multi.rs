//! The multi-lock on the two backends outside the kind matrix, which refuse the other kinds
//! but offer the multi-lock (one name after the other): a Redlock and object storage, each
//! under its own faults and then a paused holder. (The other backends' multi-lock scenarios
//! are kind scenarios: `kinds.rs`, `pg_kinds`.)

use std::time::Duration;

use super::object_store::s3;
use super::{
    Bound, Expected, MULTI, Scenario, TTL, base, kinds::MULTI_WHY, ms, paused_holder, redlock,
};
use crate::schedule::{Net, Step, Target};

/// `fault` then a holder paused past its lease and resumed after a successor wrote, for the
/// multi-lock's 3 workers: exclusion per name, the resumed holder's late write refused.
fn multi_then_pause(name: &'static str, words: &'static str, fault: Vec<Step>) -> Scenario {
    let mut cycle = fault;
    cycle.extend(paused_holder(MULTI, TTL));
    Scenario {
        workload: MULTI,
        hold: (ms(150), ms(400)),
        short: Duration::from_secs(12),
        ..base(
            name,
            words,
            cycle,
            Expected {
                stale_rejected: Bound::AtLeastOne,
                ..Expected::exclusion(TTL, MULTI_WHY)
            },
        )
    }
}

/// The multi-lock on a 5-node Redlock: 2 nodes partitioned from every worker, then a paused
/// holder.
pub fn redlock_multi() -> Scenario {
    redlock(multi_then_pause(
        "redlock-multi",
        "multi-lock (2 of 3 names): 2 of 5 nodes partitioned from every worker for 2 s, then a \
         paused holder",
        vec![
            Step::Net(Target::Nodes(vec![3, 4]), Net::Partition),
            Step::Sleep(ms(2_000)),
            Step::Net(Target::Nodes(vec![3, 4]), Net::Heal),
            Step::Sleep(ms(1_500)),
        ],
    ))
}

/// The multi-lock on SeaweedFS: the server crashed and started again on its data, then a
/// paused holder.
pub fn s3_multi() -> Scenario {
    s3(multi_then_pause(
        "s3-multi",
        "multi-lock (2 of 3 names): SeaweedFS SIGKILLed and started again on its data, then a \
         paused holder",
        vec![
            Step::KillS3,
            Step::Sleep(ms(300)),
            Step::StartS3,
            Step::Sleep(ms(1_000)),
        ],
    ))
}
