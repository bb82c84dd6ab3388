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

/// A semaphore of 2 permits on MariaDB's lease table: the server killed and restarted, then a
/// holder paused past its lease; never more than 2 holders at once.
#[test]
fn semaphores_on_mariadb_never_grant_more_than_their_permits_through_every_fault() {
    let outcome = common::run_short(&scenario::kinds_on(
        scenario::KindsOn::Mysql,
        distlock_torture::worker::Workload::Semaphore { max: 2 },
    ));
    common::assert_verdict(&outcome);
    assert_eq!(outcome.report.over_permits, 0);
}
