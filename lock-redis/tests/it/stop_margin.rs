//! The stop margin and the at-risk signal against a real redis-server whose connection is cut
//! by the fault proxy: renewals time out, the guard says it is at risk after the first failed
//! renewal, and `lost()` fires at least 400 ms before `valid_until` (2 s lease, 500 ms margin),
//! while the server still holds the lease. The assertions are about order against
//! `valid_until` and the server's own PTTL, never about speed.

use std::time::Duration;

use lock_core::Locker;
use lock_redis::RedisLock;
use lock_testkit::FaultProxy;
use tokio::time::Instant;

use crate::common::{get, pttl, raw, server, token_of};

const LEASE: Duration = Duration::from_secs(2);
const MARGIN: Duration = Duration::from_millis(500);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewals_cut_off_by_the_proxy_give_the_lease_up_before_it_ends() {
    let server = server();
    let proxy = FaultProxy::start(server.addr()).expect("proxy");
    let lock = RedisLock::builder()
        .url(proxy.url())
        .pubsub_url(server.url())
        .connect_timeout(Duration::from_millis(200))
        .command_timeout(Duration::from_millis(200))
        .build()
        .expect("valid URL");
    let locker = Locker::builder(lock).lease(LEASE).build();
    let guard = locker.lock("job").stop_margin(MARGIN).await.expect("free");
    let token = token_of(&guard);
    let mut direct = raw(&server).await;
    proxy.partition();

    tokio::time::timeout(LEASE, guard.at_risk())
        .await
        .expect("at risk before the lease ran out");
    assert!(guard.is_at_risk(), "at risk after the first failed renewal");
    assert!(guard.is_held(), "at risk, not lost");
    assert!(
        Instant::now() < guard.stop_at(),
        "the at-risk signal came before the stop point"
    );

    tokio::time::timeout(LEASE, guard.lost())
        .await
        .expect("lost before the lease ran out");
    let left = guard
        .valid_until()
        .saturating_duration_since(Instant::now());
    assert!(
        left >= Duration::from_millis(400),
        "lost() only {left:?} before valid_until"
    );
    // The server still holds our lease (renewals never reached it: it counts from the grant).
    assert_eq!(
        get(&mut direct, "job").await.as_deref(),
        Some(token.as_str())
    );
    assert!(
        pttl(&mut direct, "job").await > 0,
        "the key still lives at the stop point"
    );
    assert!(!guard.is_held());
    proxy.heal();
}
