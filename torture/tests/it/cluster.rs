//! Torture scenario on a Redis Cluster (`RedisLock` in cluster mode), short form.

use distlock_torture::scenario;

use crate::common;

#[test]
fn a_cluster_failover_never_lets_a_stale_write_in() {
    let outcome = common::run_short(&scenario::cluster_failover());
    common::assert_verdict(&outcome);
    let r = &outcome.report;
    assert_eq!(r.stale_accepted + r.stale_accepted_in_log, 0);
    assert_eq!(r.token_regressions, 0);
}
