//! Through Sentinel (`--sentinel-master`): `ls`, `show`, `release` and `run` find the master
//! the sentinels name.

use std::time::Duration;

use lock_core::Locker;
use lock_redis::RedisLock;
use lock_testkit::RedisSentinelSet;

use crate::common::{distlock, find, json, stderr, token_of};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_the_sentinels() {
    let set = RedisSentinelSet::start().expect("primary, replica and sentinels");
    let urls = set.sentinel_urls();
    let master = set.master_name().to_owned();
    let lock = RedisLock::builder()
        .sentinel(urls.clone(), master.clone())
        .build()
        .expect("lock");
    let guard = Locker::new(lock)
        .lock("sentinel:job")
        .lease(Duration::from_secs(30))
        .acquire()
        .await
        .expect("acquire through the sentinels");
    let token = token_of(&guard);
    let (listed, released, ran) = tokio::task::spawn_blocking(move || {
        let m = ["--sentinel-master", master.as_str()];
        (
            distlock(
                &urls,
                &[&m[..], &["--json", "show", "sentinel:job"]].concat(),
            ),
            distlock(
                &urls,
                &[&m[..], &["release", "sentinel:job", "--token", &token]].concat(),
            ),
            distlock(
                &urls,
                &[
                    &m[..],
                    &["run", "sentinel:job", "--wait", "2s", "--", "true"],
                ]
                .concat(),
            ),
        )
    })
    .await
    .expect("run distlock");
    assert_eq!(
        find(&json(&listed), "sentinel:job", "mutex")["token"],
        token_of(&guard).as_str()
    );
    assert_eq!(released.status.code(), Some(0), "{}", stderr(&released));
    assert_eq!(ran.status.code(), Some(0), "{}", stderr(&ran));
}
