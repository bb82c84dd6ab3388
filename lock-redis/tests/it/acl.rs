//! A least-privilege ACL user — only the commands distlock sends, only its keys and channels —
//! is enough for every lock operation, and a name outside its key pattern is refused with a
//! typed, non-retryable error that leaves nothing behind.

use std::time::Duration;

use lock_core::{Backoff, LockError, Locker};
use lock_redis::RedisLock;

use crate::common::server;

/// The ACL rule documented in the crate README, for the key prefix `locks:`.
const RULE: &[&str] = &[
    "on",
    ">s3cret",
    "resetkeys",
    "~locks:*",
    "~{locks:*",
    "resetchannels",
    "&locks:*",
    "&{locks:*",
    "-@all",
    "+evalsha",
    "+script|load",
    "+get",
    "+set",
    "+del",
    "+pexpire",
    "+pttl",
    "+time",
    "+publish",
    "+subscribe",
    "+unsubscribe",
    "+ping",
    "+hello",
    "+mget",
    "+client|tracking",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_least_privilege_user_can_do_everything_distlock_needs() {
    let server = server();
    let mut args = vec!["ACL", "SETUSER", "locker"];
    args.extend_from_slice(RULE);
    server.command(&args).expect("ACL SETUSER");
    let url = server.url().replace("redis://", "redis://locker:s3cret@");
    let locker = |polling: Duration| {
        Locker::builder(
            RedisLock::builder()
                .url(url.clone())
                .prefix("locks:")
                .build()
                .expect("url"),
        )
        .lease(Duration::from_millis(600))
        .backoff(Backoff::new(polling, polling))
        .build()
    };
    let (holder_side, waiter_side) = (
        locker(Duration::from_millis(1)),
        locker(Duration::from_secs(10)),
    );

    // Acquire (renewed), busy answer, renewal, release with announcement, wake-up.
    let held = holder_side
        .lock("order:1")
        .await
        .expect("acquire as the ACL user");
    assert!(
        holder_side
            .lock("order:1")
            .try_acquire()
            .await
            .expect("busy answer")
            .is_none()
    );
    let waiter = tokio::spawn(async move {
        waiter_side
            .lock("order:1")
            .wait(Duration::from_secs(30))
            .await
            .map(drop)
    });
    tokio::time::sleep(Duration::from_millis(700)).await; // past one lease: renewed
    assert!(held.is_held(), "renewal works under the ACL");
    held.release().await.expect("release as the ACL user");
    tokio::time::timeout(Duration::from_secs(8), waiter)
        .await
        .expect("woken by the announcement (SUBSCRIBE and PUBLISH allowed), not a 10 s poll")
        .expect("no panic")
        .expect("acquired");
    // Tagged names and fixed TTLs too.
    let tagged = holder_side
        .lock("{tenant}:job")
        .fixed_ttl(Duration::from_secs(5))
        .await
        .expect("tagged name");
    tagged.release().await.expect("ours");
    // Leader election: the record beside the grant (annotate) and its observers
    // (describe_holder) need no more commands.
    let leadership = holder_side
        .elect("leader")
        .value("pod-a")
        .campaign()
        .await
        .expect("elected as the ACL user");
    let leader = holder_side
        .elect("leader")
        .leader()
        .await
        .expect("read as the ACL user")
        .expect("a leader");
    assert_eq!(leader.term(), leadership.term());
    assert_eq!(leader.value_str(), Some("pod-a"));
    leadership.resign().await.expect("ours");
}

#[tokio::test]
async fn a_name_outside_the_users_keys_is_refused() {
    let server = server();
    let mut args = vec!["ACL", "SETUSER", "locker"];
    args.extend_from_slice(RULE);
    server.command(&args).expect("ACL SETUSER");
    let url = server.url().replace("redis://", "redis://locker:s3cret@");
    // No prefix: the key `order:1` is outside `~locks:*`.
    let locker = Locker::new(RedisLock::from_url(&url).expect("url"));
    let err = locker
        .lock("order:1")
        .wait(Duration::from_secs(10))
        .await
        .expect_err("NOPERM");
    assert!(
        matches!(
            err,
            LockError::Backend {
                retryable: false,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(
        server.command(&["DBSIZE"]).expect("DBSIZE"),
        "0",
        "nothing was written"
    );
}
