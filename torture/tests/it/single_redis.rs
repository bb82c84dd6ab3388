//! Torture scenarios on one server (`RedisLock`), short form: each on redis-server
//! (`redis_server::…`) and on Valkey's valkey-server (`valkey_server::…`), with the same
//! verdicts.

use distlock_torture::{Server, scenario};

use crate::common;

fn a_paused_holder_resumes_into_a_fenced_rejection(server: Server) {
    let outcome = common::run_short_on(&scenario::holder_pause(), server);
    common::assert_verdict(&outcome);
    let r = &outcome.report;
    assert!(
        r.stale_rejected >= 1,
        "the resumed holder's write was rejected"
    );
    assert_eq!(r.overlaps.len(), 0);
}

fn restarted_empty_keeps_fencing_tokens_growing(server: Server) {
    let outcome = common::run_short_on(&scenario::redis_restart_empty(), server);
    // The verdict also holds the next grant to no sooner than the grace period after each
    // restart (`recovery_not_before`).
    common::assert_verdict(&outcome);
    let r = &outcome.report;
    assert_eq!(
        r.overlaps.len(),
        0,
        "the grace period keeps a second holder out"
    );
    assert_eq!(r.token_regressions, 0);
    assert_eq!(r.stale_accepted, 0);
}

fn a_slow_server_never_grants_twice(server: Server) {
    let outcome = common::run_short_on(&scenario::redis_slow(), server);
    common::assert_verdict(&outcome);
    assert_eq!(outcome.report.overlaps.len(), 0);
}

fn a_holder_cut_off_longer_than_its_lease_is_replaced_safely(server: Server) {
    let outcome = common::run_short_on(&scenario::worker_partition(), server);
    common::assert_verdict(&outcome);
    assert_eq!(outcome.report.overlaps.len(), 0);
}

/// Each scenario above as a test on each server.
macro_rules! on_each_server {
    ($($check:ident),+ $(,)?) => {
        mod redis_server {
            $(
                #[test]
                fn $check() {
                    super::$check(distlock_torture::Server::Redis);
                }
            )+
        }
        mod valkey_server {
            $(
                #[test]
                fn $check() {
                    super::$check(distlock_torture::Server::Valkey);
                }
            )+
        }
    };
}

on_each_server!(
    a_paused_holder_resumes_into_a_fenced_rejection,
    restarted_empty_keeps_fencing_tokens_growing,
    a_slow_server_never_grants_twice,
    a_holder_cut_off_longer_than_its_lease_is_replaced_safely,
);

/// Eviction deletes held lock keys: by default the workers only warn, so overlaps may happen
/// (the verdict says so), and fencing still keeps every stale write out. On redis-server only,
/// to keep the suite short.
#[test]
fn memory_pressure_lets_no_stale_write_through() {
    let outcome = common::run_short(&scenario::memory_pressure_evicts());
    common::assert_verdict(&outcome);
    let r = &outcome.report;
    assert_eq!(r.stale_accepted, 0);
    assert_eq!(r.token_regressions, 0);
}

/// The grace period's bar: a Redis restarted empty at least 12 times under a renewed holder and waiting
/// worker processes grants the lock twice 0 times (7 of 12 before the grace period), and the
/// verdict holds every next grant to after the grace.
#[test]
fn twelve_restarts_empty_never_grant_twice() {
    let outcome = common::run_for(
        &scenario::redis_restart_empty(),
        std::time::Duration::from_secs(38),
    );
    common::assert_verdict(&outcome);
    assert!(outcome.cycles >= 12, "only {} restarts", outcome.cycles);
    assert_eq!(outcome.report.overlaps.len(), 0);
}

/// A read-write lock on one Redis: its holder partitioned past its lease, then paused past it
/// (the other kinds under the same faults: `torture --scenario kinds`).
#[test]
fn read_write_locks_on_redis_keep_writers_alone_through_partitions_and_pauses() {
    let outcome = common::run_short(&scenario::kinds_on(
        scenario::KindsOn::Redis,
        distlock_torture::worker::Workload::ReadWrite { write_percent: 30 },
    ));
    common::assert_verdict(&outcome);
    let r = &outcome.report;
    assert_eq!(r.overlaps.len(), 0);
    assert_eq!(r.stale_accepted, 0);
}

/// The multi-lock on one Redis (2 of 3 names a round, so every two holders share a name): the
/// holder partitioned past its leases, then paused past them. The checker judges each name
/// apart: no two valid leases on one name, and the resumed holder's late write on the name
/// its successor shares refused by that name's fence.
#[test]
fn multi_locks_on_redis_keep_each_name_to_one_holder_through_partitions_and_pauses() {
    let outcome = common::run_short(&scenario::kinds_on(
        scenario::KindsOn::Redis,
        scenario::MULTI,
    ));
    common::assert_verdict(&outcome);
    let r = &outcome.report;
    assert_eq!(r.overlaps.len(), 0);
    assert_eq!(r.stale_accepted, 0);
    assert!(r.registers.len() >= 2, "the names were fenced apart");
}
