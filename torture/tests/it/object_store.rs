//! Torture scenarios on one SeaweedFS (`ObjectStoreLock`, the fenced log an object written by
//! `fenced_put`), short form.

use distlock_torture::{Scenario, scenario};

use crate::common;

/// Runs `scenario`'s short form: its verdict, no second holder, and a late write refused.
fn fenced_after(scenario: &Scenario, late: &str) {
    let outcome = common::run_short(scenario);
    common::assert_verdict(&outcome);
    let r = &outcome.report;
    assert_eq!(r.overlaps.len(), 0);
    assert_eq!(r.stale_accepted, 0);
    assert!(r.stale_rejected >= 1, "{late} was not refused");
    assert_eq!(r.token_regressions, 0);
}

#[test]
fn seaweedfs_restarted_then_a_paused_holder_is_fenced() {
    fenced_after(
        &scenario::s3_restart_pause(),
        "the paused holder's late write",
    );
}

/// The holder cut off from SeaweedFS (through its proxy: the lock and the log object alike)
/// past its lease, healed once a successor wrote: no second holder, and the holder's write
/// that reaches the log after the heal is refused by the successor's token.
#[test]
fn a_holder_cut_off_from_seaweedfs_is_replaced_and_its_late_write_refused() {
    fenced_after(&scenario::s3_partition(), "the cut-off holder's late write");
}
