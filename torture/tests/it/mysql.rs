//! Torture scenarios on one MariaDB (`MysqlLock`, the lease table), short form.

use distlock_torture::scenario;

use crate::common;

#[test]
fn mariadb_killed_and_restarted_keeps_exclusion_and_growing_tokens() {
    let outcome = common::run_short(&scenario::mysql_restart());
    common::assert_verdict(&outcome);
    let r = &outcome.report;
    assert_eq!(r.overlaps.len(), 0);
    assert_eq!(r.stale_accepted, 0);
    assert_eq!(r.token_regressions, 0);
}

/// Kleppmann's pause on MariaDB, the fenced log behind MySQL's own `distlock_fence` (on a
/// MariaDB of its own): the resumed holder's late writes are refused, none accepted, and the
/// fenced register stays linearizable.
#[test]
fn a_paused_holders_late_writes_are_refused_by_mysqls_fence() {
    let outcome = common::run_short(&scenario::mysql_holder_pause());
    common::assert_verdict(&outcome);
    let r = &outcome.report;
    assert_eq!(r.stale_accepted, 0);
    assert!(
        r.stale_rejected >= 1,
        "the resumed holder's write was rejected"
    );
}
