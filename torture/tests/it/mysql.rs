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
