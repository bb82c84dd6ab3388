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
    // The node that restarted empty is in its grace period for every worker that saw its new
    // run_id, so it does not vote and no second quorum forms (before the grace period, a
    // second holder showed up in every cycle of the README's 30 s runs).
    common::assert_verdict(&outcome);
    let r = &outcome.report;
    assert_eq!(r.overlaps.len(), 0);
    assert_eq!(r.stale_accepted, 0);
    assert_eq!(r.token_regressions, 0);
}

#[test]
fn the_delayed_restart_rule_keeps_exclusion() {
    let outcome = common::run_short(&scenario::redlock_delayed_restart());
    common::assert_verdict(&outcome);
    assert_eq!(outcome.report.overlaps.len(), 0);
}

/// The grace period's bar for Redlock: at least 5 cycles of a node restarted empty under a holder on a
/// bare quorum, 0 second quorums (5 of 5 before the grace period).
#[test]
fn five_immediate_restarts_never_form_a_second_quorum() {
    let outcome = common::run_for(
        &scenario::redlock_restart_empty(),
        std::time::Duration::from_secs(32),
    );
    common::assert_verdict(&outcome);
    assert!(outcome.cycles >= 5, "only {} cycles", outcome.cycles);
    assert_eq!(outcome.report.overlaps.len(), 0);
}
