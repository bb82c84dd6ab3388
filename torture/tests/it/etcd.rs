//! Torture scenarios on a 3-member etcd cluster (`EtcdLock`), short form: the leader killed,
//! the leader partitioned (a minority of one), the holder paused past its lease, the whole
//! cluster restarted on its data. Exclusion holds in each, restarts included.

use distlock_torture::scenario;

use crate::common;

#[test]
fn a_killed_etcd_leader_keeps_exclusion() {
    let outcome = common::run_short(&scenario::etcd_leader_kill());
    common::assert_verdict(&outcome);
    assert_eq!(outcome.report.overlaps.len(), 0);
    assert!(
        outcome.report.recoveries.len() >= 2,
        "election and restart measured"
    );
}

#[test]
fn a_partitioned_etcd_leader_keeps_exclusion() {
    let outcome = common::run_short(&scenario::etcd_leader_partition());
    common::assert_verdict(&outcome);
    assert_eq!(outcome.report.overlaps.len(), 0);
}

#[test]
fn a_paused_holder_resumes_into_a_fenced_rejection_on_etcd() {
    let outcome = common::run_short(&scenario::etcd_holder_pause());
    common::assert_verdict(&outcome);
    assert!(
        outcome.report.stale_rejected >= 1,
        "the resumed holder's write was rejected"
    );
}

#[test]
fn a_whole_etcd_cluster_restarted_keeps_exclusion() {
    let outcome = common::run_short(&scenario::etcd_restart_all());
    common::assert_verdict(&outcome);
    assert_eq!(outcome.report.overlaps.len(), 0);
    assert_eq!(outcome.report.stale_accepted, 0);
}

/// A fair lock on etcd: the leader killed and restarted, then a holder paused past its lease;
/// exclusion, and the resumed holder's late write refused.
#[test]
fn fair_locks_on_etcd_keep_exclusion_through_every_fault() {
    let outcome = common::run_short(&scenario::kinds_on(
        scenario::KindsOn::Etcd,
        distlock_torture::worker::Workload::Fair,
    ));
    common::assert_verdict(&outcome);
    let r = &outcome.report;
    assert_eq!(r.overlaps.len(), 0);
    assert!(
        r.stale_rejected >= 1,
        "the resumed holder's write was rejected"
    );
}
