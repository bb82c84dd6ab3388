//! Torture scenarios on one PostgreSQL (`PostgresLock`, the lease table), short form.

use distlock_torture::scenario;
use distlock_torture::worker::Workload;

use crate::common;

#[test]
fn postgres_restarted_fast_keeps_exclusion() {
    let outcome = common::run_short(&scenario::pg_restart(true));
    common::assert_verdict(&outcome);
    assert_eq!(outcome.report.overlaps.len(), 0);
}

#[test]
fn postgres_restarted_immediately_keeps_exclusion() {
    let outcome = common::run_short(&scenario::pg_restart(false));
    common::assert_verdict(&outcome);
    assert_eq!(outcome.report.overlaps.len(), 0);
}

#[test]
fn a_paused_holder_resumes_into_a_fenced_rejection_on_postgres() {
    let outcome = common::run_short(&scenario::pg_holder_pause());
    common::assert_verdict(&outcome);
    assert!(
        outcome.report.stale_rejected >= 1,
        "the resumed holder's write was rejected"
    );
}

#[test]
fn terminated_backends_do_not_break_the_lease_table() {
    let outcome = common::run_short(&scenario::pg_terminate_backends());
    common::assert_verdict(&outcome);
    assert_eq!(outcome.report.overlaps.len(), 0);
}

#[test]
fn a_holder_cut_off_from_postgres_is_replaced_safely() {
    let outcome = common::run_short(&scenario::pg_worker_partition());
    common::assert_verdict(&outcome);
    assert_eq!(outcome.report.overlaps.len(), 0);
}

#[test]
fn read_write_locks_on_postgres_keep_writers_alone_through_every_fault() {
    let outcome = common::run_short(&scenario::pg_kinds(Workload::ReadWrite {
        write_percent: 30,
    }));
    common::assert_verdict(&outcome);
    let r = &outcome.report;
    assert_eq!(r.overlaps.len(), 0);
    assert_eq!(r.stale_accepted, 0);
}

#[test]
fn semaphores_on_postgres_never_grant_more_than_their_permits_through_every_fault() {
    let outcome = common::run_short(&scenario::pg_kinds(Workload::Semaphore { max: 2 }));
    common::assert_verdict(&outcome);
    assert_eq!(outcome.report.over_permits, 0);
}

#[test]
fn fair_locks_on_postgres_keep_exclusion_through_every_fault() {
    let outcome = common::run_short(&scenario::pg_kinds(Workload::Fair));
    common::assert_verdict(&outcome);
    let r = &outcome.report;
    assert_eq!(r.overlaps.len(), 0);
    assert!(
        r.stale_rejected >= 1,
        "the resumed holder's write was rejected"
    );
}
