//! Torture scenario on a Redis Cluster (`RedisLock` in cluster mode), short form: on a cluster
//! of redis-servers (`redis_server::…`) and of Valkey's valkey-servers (`valkey_server::…`).

use distlock_torture::{Server, scenario};

use crate::common;

fn a_cluster_failover_never_lets_a_stale_write_in(server: Server) {
    let outcome = common::run_short_on(&scenario::cluster_failover(), server);
    common::assert_verdict(&outcome);
    let r = &outcome.report;
    assert_eq!(r.stale_accepted, 0);
    assert_eq!(r.token_regressions, 0);
}

mod redis_server {
    #[test]
    fn a_cluster_failover_never_lets_a_stale_write_in() {
        super::a_cluster_failover_never_lets_a_stale_write_in(distlock_torture::Server::Redis);
    }
}

mod valkey_server {
    #[test]
    fn a_cluster_failover_never_lets_a_stale_write_in() {
        super::a_cluster_failover_never_lets_a_stale_write_in(distlock_torture::Server::Valkey);
    }
}
