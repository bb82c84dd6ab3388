//! A holder learns at once that its key is gone: after a foreign `DEL` or `SET` of a held key,
//! `lost()` fires long before the next renewal would have found out (a 30 s lease is renewed
//! at 10 s), on Redis and on Valkey. Its own renewals and release are not losses. Where the
//! server refuses `CLIENT TRACKING`, losses are seen at renewal, as before.

use std::time::Duration;

use lock_core::{Guard, Locker};
use lock_redis::RedisLock;
use lock_testkit::RedisServer;
use redis::aio::MultiplexedConnection;

use crate::common::{raw, server, token_of, valkey};

/// Well within the first renewal (10 s into a 30 s lease), and far above any wake-up time.
const SOON: Duration = Duration::from_secs(3);

/// A locker whose leases are watched from their grant on.
fn tracking_locker(server: &RedisServer, lease: Duration) -> Locker {
    let lock = RedisLock::builder()
        .url(server.url())
        .track_losses_after(Duration::ZERO)
        .build()
        .expect("url");
    Locker::builder(lock).lease(lease).build()
}

/// How many keys the server tracks for client-side caching (`INFO stats`).
async fn tracked_keys(conn: &mut MultiplexedConnection) -> u64 {
    let stats: String = redis::cmd("INFO")
        .arg("stats")
        .query_async(conn)
        .await
        .expect("INFO stats");
    stats
        .lines()
        .find_map(|line| line.strip_prefix("tracking_total_keys:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

/// Waits (bounded: at most 5 s, in 10 ms steps) until the server tracks `count` keys.
async fn wait_tracked(conn: &mut MultiplexedConnection, count: u64) {
    for _ in 0..500 {
        if tracked_keys(conn).await >= count {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the server never tracked {count} key(s)");
}

/// Holds `name` on `server` under a 30 s lease, lets `tamper` change its key from another
/// connection, and asserts that `lost()` fires within [`SOON`].
async fn lost_soon_after(server: &RedisServer, name: &str, tamper: &[&str]) {
    let locker = tracking_locker(server, Duration::from_secs(30));
    let guard: Guard = locker.lock(name).await.expect("free");
    let mut conn = raw(server).await;
    wait_tracked(&mut conn, 1).await;
    let mut command = redis::cmd(tamper[0]);
    for arg in &tamper[1..] {
        command.arg(*arg);
    }
    command.query_async::<()>(&mut conn).await.expect("tamper");
    tokio::time::timeout(SOON, guard.lost())
        .await
        .unwrap_or_else(|_| panic!("lost() fired after `{}`", tamper.join(" ")));
    assert!(!guard.is_held(), "a lost guard no longer holds");
}

async fn a_foreign_del_and_set_are_losses(server: &RedisServer) {
    lost_soon_after(server, "deleted", &["DEL", "deleted"]).await;
    lost_soon_after(
        server,
        "overwritten",
        &["SET", "overwritten", "someone-else"],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_holders_learn_at_once_that_their_key_is_gone() {
    a_foreign_del_and_set_are_losses(&server()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn valkey_holders_learn_at_once_that_their_key_is_gone() {
    a_foreign_del_and_set_are_losses(&valkey()).await;
}

/// Renewals every 200 ms, each an invalidation of the tracked key: none is taken for a loss,
/// and the release is the lease's own.
async fn own_renewals_are_not_losses(server: &RedisServer) {
    let locker = tracking_locker(server, Duration::from_millis(600));
    let guard = locker.lock("renewed").await.expect("free");
    let mut conn = raw(server).await;
    wait_tracked(&mut conn, 1).await;
    let token = token_of(&guard);
    let lost = tokio::time::timeout(Duration::from_millis(1_500), guard.lost()).await;
    assert!(lost.is_err(), "seven renewals are not a loss");
    assert!(guard.is_held());
    assert_eq!(
        crate::common::get(&mut conn, "renewed").await.as_deref(),
        Some(token.as_str())
    );
    guard.release().await.expect("still ours");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_renewals_are_not_losses() {
    own_renewals_are_not_losses(&server()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn valkey_renewals_are_not_losses() {
    own_renewals_are_not_losses(&valkey()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_tracking_the_loss_is_seen_at_renewal() {
    let server = server();
    // A user that may lock but not track: the refusal is seen once, and nothing breaks.
    server
        .command(&[
            "ACL", "SETUSER", "locker", "on", ">pw", "~*", "&*", "+@all", "-client",
        ])
        .expect("ACL SETUSER");
    let url = server.url().replace("redis://", "redis://locker:pw@");
    let lock = RedisLock::builder()
        .url(url)
        .track_losses_after(Duration::ZERO)
        .build()
        .expect("url");
    let locker = Locker::builder(lock)
        .lease(Duration::from_millis(900))
        .build();
    let guard = locker.lock("job").await.expect("free");
    let mut conn = raw(&server).await;
    // Let the tracker try (and be refused) before the key goes.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(tracked_keys(&mut conn).await, 0, "nothing tracked");
    redis::cmd("DEL")
        .arg("job")
        .query_async::<()>(&mut conn)
        .await
        .expect("DEL");
    // The renewal at 300 ms into the lease finds the key gone.
    tokio::time::timeout(SOON, guard.lost())
        .await
        .expect("lost() at the next renewal");
    // Later grants still work.
    let again = locker.lock("job").await.expect("free again");
    again.release().await.expect("ours");
}

/// An empty restart drops the tracking connection with the data: the tracker reconnects,
/// reads the key again, finds it gone, and the holder is told then, not at its renewal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_restart_is_a_loss_seen_on_reconnecting() {
    let mut server = server();
    let locker = tracking_locker(&server, Duration::from_secs(30));
    let guard = locker.lock("job").await.expect("free");
    let mut conn = raw(&server).await;
    wait_tracked(&mut conn, 1).await;
    server
        .restart(lock_testkit::KeepData::Discard)
        .expect("restart empty");
    tokio::time::timeout(SOON, guard.lost())
        .await
        .expect("lost() once the tracker reconnected");
}
