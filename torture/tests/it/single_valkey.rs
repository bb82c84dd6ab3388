//! Torture scenarios on one Valkey server (`RedisLock` on `valkey-server`), short form: the
//! single-server scenarios of `single_redis`, with the same verdicts.

use distlock_torture::{Server, scenario};

use crate::common;

#[test]
fn a_paused_holder_resumes_into_a_fenced_rejection() {
    let outcome = common::run_short_on(&scenario::holder_pause(), Server::Valkey);
    common::assert_verdict(&outcome);
    let r = &outcome.report;
    assert!(
        r.stale_rejected >= 1,
        "the resumed holder's write was rejected"
    );
    assert_eq!(r.overlaps.len(), 0);
}

#[test]
fn valkey_restarted_empty_keeps_fencing_tokens_growing() {
    let outcome = common::run_short_on(&scenario::redis_restart_empty(), Server::Valkey);
    common::assert_verdict(&outcome);
    let r = &outcome.report;
    assert_eq!(r.token_regressions, 0);
    assert_eq!(r.stale_accepted + r.stale_accepted_in_log, 0);
}

#[test]
fn slow_valkey_never_grants_twice() {
    let outcome = common::run_short_on(&scenario::redis_slow(), Server::Valkey);
    common::assert_verdict(&outcome);
    assert_eq!(outcome.report.overlaps.len(), 0);
}

#[test]
fn a_holder_cut_off_longer_than_its_lease_is_replaced_safely() {
    let outcome = common::run_short_on(&scenario::worker_partition(), Server::Valkey);
    common::assert_verdict(&outcome);
    assert_eq!(outcome.report.overlaps.len(), 0);
}
