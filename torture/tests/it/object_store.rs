//! Torture scenarios on one SeaweedFS (`ObjectStoreLock`, the fenced log an object written by
//! `fenced_put`), short form.

use distlock_torture::scenario;

use crate::common;

#[test]
fn seaweedfs_restarted_then_a_paused_holder_is_fenced() {
    let outcome = common::run_short(&scenario::s3_restart_pause());
    common::assert_verdict(&outcome);
    let r = &outcome.report;
    assert_eq!(r.overlaps.len(), 0);
    assert_eq!(r.stale_accepted, 0);
    assert!(
        r.stale_rejected >= 1,
        "the paused holder's late write was not refused"
    );
    assert_eq!(r.token_regressions, 0);
}
