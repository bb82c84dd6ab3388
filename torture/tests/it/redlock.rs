//! Torture scenarios on five independent Redis nodes (`Redlock`), short form.

use distlock_torture::scenario;

use crate::common;

#[test]
fn a_killed_minority_does_not_break_exclusion() {
    let outcome = common::run_short(&scenario::redlock_minority_kill());
    common::assert_verdict(&outcome);
}

#[test]
fn a_paused_minority_does_not_break_exclusion() {
    let outcome = common::run_short(&scenario::redlock_minority_pause());
    common::assert_verdict(&outcome);
}

#[test]
fn a_partitioned_minority_does_not_break_exclusion() {
    let outcome = common::run_short(&scenario::redlock_minority_partition());
    common::assert_verdict(&outcome);
}

#[test]
fn a_node_restarted_empty_at_once_lets_no_stale_write_through() {
    let outcome = common::run_short(&scenario::redlock_restart_empty());
    // The written verdict: overlaps may happen (a second quorum can form once the node forgot
    // the holder's key); stale writes are still all rejected and tokens still grow. Whether a
    // second holder shows up in a 10 s run depends on timing (the 30 s runs in the README saw
    // one in every cycle; a CI run once saw none), so it is reported, not required here; that
    // the checker finds overlaps when they happen is `checker::sections`' unit test.
    common::assert_verdict(&outcome);
    let r = &outcome.report;
    assert_eq!(r.stale_accepted + r.stale_accepted_in_log, 0);
    assert_eq!(r.token_regressions, 0);
}

#[test]
fn the_delayed_restart_rule_keeps_exclusion() {
    let outcome = common::run_short(&scenario::redlock_delayed_restart());
    common::assert_verdict(&outcome);
    assert_eq!(outcome.report.overlaps.len(), 0);
}
