//! Torture scenarios on five independent Redis nodes (`Redlock`), short form.

mod common;

use distlock_torture::scenario;

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
fn a_node_restarted_empty_at_once_lets_a_second_quorum_form() {
    let outcome = common::run_short(&scenario::redlock_restart_empty());
    // The written verdict: overlaps may happen; stale writes are still all rejected.
    common::assert_verdict(&outcome);
    // The scenario is built so that they do happen, and the checker must see them.
    assert!(
        !outcome.report.overlaps.is_empty(),
        "the checker saw no second holder"
    );
}

#[test]
fn the_delayed_restart_rule_keeps_exclusion() {
    let outcome = common::run_short(&scenario::redlock_delayed_restart());
    common::assert_verdict(&outcome);
    assert_eq!(outcome.report.overlaps.len(), 0);
}
