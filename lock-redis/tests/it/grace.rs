//! The store grace period: a Redis that may have lost grants grants nothing until
//! the longest lease could have run out; a fresh Redis grants at once; strict mode covers a
//! process that never saw the old server and refuses a server that may evict lock keys; a full
//! Redis under `noeviction` gives a retryable error, never a grant. The same over several
//! processes and many restarts is the torture suite's `redis-restart-empty`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use lock_core::backend::{Attempt, Lock};
use lock_core::{LockError, Locker, Token};
use lock_redis::metric::{
    EVICTION_RISK_TOTAL as METRIC_EVICTION_RISK_TOTAL,
    GRACE_REFUSED_TOTAL as METRIC_GRACE_REFUSED_TOTAL,
};
use lock_redis::{EvictionRisk, RedisLock};
use lock_testkit::{KeepData, RedisServer};
use metrics_util::debugging::{DebugValue, DebuggingRecorder};

use crate::common::{raw, server};

const GRACE: Duration = Duration::from_millis(1500);
/// Bounds the loops below: attempts, each bounded by the lock's timeouts.
const ATTEMPTS: usize = 40;

fn lock(server: &RedisServer, strict: bool) -> RedisLock {
    RedisLock::builder()
        .url(server.url())
        .grace(GRACE)
        .strict(strict)
        .connect_timeout(Duration::from_millis(500))
        .command_timeout(Duration::from_millis(500))
        .build()
        .expect("valid settings")
}

/// The first attempt that is not an error: a restart breaks the connection, so the attempt
/// that finds it out fails (retryably) and the next one connects anew.
async fn attempt(lock: &RedisLock, name: &str) -> Attempt {
    for _ in 0..ATTEMPTS {
        match lock
            .try_acquire(name, Token::generate().expect("token"), GRACE)
            .await
        {
            Ok(attempt) => return attempt,
            Err(err) if err.is_retryable() => tokio::time::sleep(Duration::from_millis(50)).await,
            Err(err) => panic!("not a retryable error: {err:?}"),
        }
    }
    panic!("no answer in {ATTEMPTS} attempts");
}

fn counter(snapshot: &[(String, DebugValue)], name: &str) -> u64 {
    snapshot
        .iter()
        .filter(|(key, _)| key == name)
        .map(|(_, value)| match value {
            DebugValue::Counter(n) => *n,
            _ => 0,
        })
        .sum()
}

fn snapshot(recorder: &DebuggingRecorder) -> Vec<(String, DebugValue)> {
    recorder
        .snapshotter()
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(key, _, _, value)| (key.key().name().to_owned(), value))
        .collect()
}

#[tokio::test]
async fn the_first_lock_on_a_fresh_redis_is_granted_at_once() {
    let server = server();
    // The default grace (30 s) is on; a process's first connection compares with nothing.
    let locker = Locker::new(RedisLock::from_url(&server.url()).expect("url"));
    let guard = locker
        .lock("fresh")
        .try_acquire()
        .await
        .expect("up")
        .expect("granted on the first try");
    guard.release().await.expect("released");
}

#[test]
fn a_process_that_saw_the_restart_grants_nothing_until_the_grace_has_run_out() {
    let recorder = DebuggingRecorder::new();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    metrics::with_local_recorder(&recorder, || {
        rt.block_on(async {
            let mut server = server();
            let holder = Locker::new(lock(&server, false));
            let waiter = Arc::new(lock(&server, false));
            let guard = holder.lock("job").lease(GRACE).await.expect("granted");
            let first_token = guard.fencing_token();
            assert!(matches!(
                attempt(&waiter, "job").await,
                Attempt::Busy { .. }
            ));

            server.restart(KeepData::Discard).expect("restarted empty");
            let restarted = Instant::now();
            // The key is gone, but the waiter saw the new run_id: busy for the grace.
            match attempt(&waiter, "job").await {
                Attempt::Busy {
                    holder_ttl: Some(left),
                    announces: false,
                } => assert!(left <= GRACE && !left.is_zero(), "{left:?}"),
                other => panic!("granted or odd during the grace: {other:?}"),
            }
            let got = Locker::new(Arc::clone(&waiter))
                .lock("job")
                .wait(GRACE * 4)
                .await
                .expect("granted once the grace is over");
            assert!(
                restarted.elapsed() >= GRACE,
                "granted {:?} after the restart, within the grace of {GRACE:?}",
                restarted.elapsed()
            );
            assert!(
                got.fencing_token() > first_token,
                "fencing tokens still grow"
            );
            got.release().await.expect("released");
            drop(guard);
        });
    });
    let snapshot = snapshot(&recorder);
    assert!(
        counter(&snapshot, METRIC_GRACE_REFUSED_TOTAL) >= 1,
        "{snapshot:?}"
    );
}

#[tokio::test]
async fn a_holder_whose_key_was_lost_is_told_so_at_its_next_extend() {
    let mut server = server();
    let holder = lock(&server, false);
    let Attempt::Acquired(lease) = attempt(&holder, "kept").await else {
        panic!("free");
    };
    server.restart(KeepData::Discard).expect("restarted empty");
    for _ in 0..ATTEMPTS {
        match holder.extend(&lease, GRACE).await {
            Ok(extended) => {
                assert_eq!(extended, None, "the key is gone: the lease is lost");
                return;
            }
            Err(err) if err.is_retryable() => tokio::time::sleep(Duration::from_millis(50)).await,
            Err(err) => panic!("{err:?}"),
        }
    }
    panic!("no answer");
}

#[tokio::test]
async fn in_strict_mode_a_process_that_never_saw_the_old_server_respects_the_grace() {
    let mut server = server();
    server.restart(KeepData::Discard).expect("restarted empty");
    // Built after the restart: it never saw the old server.
    let strict = lock(&server, true);
    match attempt(&strict, "late").await {
        Attempt::Busy {
            holder_ttl: Some(left),
            ..
        } => assert!(left <= GRACE, "{left:?}"),
        other => panic!("strict mode granted on a Redis started just now: {other:?}"),
    }
    // By default such a process cannot tell, and grants: the documented limit.
    let lenient = lock(&server, false);
    assert!(matches!(
        attempt(&lenient, "late").await,
        Attempt::Acquired(_)
    ));
}

fn evicting_server() -> RedisServer {
    RedisServer::builder()
        .arg("--maxmemory")
        .arg("4mb")
        .arg("--maxmemory-policy")
        .arg("allkeys-lru")
        .start()
        .expect("start redis-server")
}

/// Writes about `mb` MB of other keys (1 KB values), as another application of the same Redis.
async fn fill(server: &RedisServer, mb: usize) -> Result<(), redis::RedisError> {
    let mut conn = raw(server).await;
    let value = vec![b'x'; 1024];
    for batch in 0..mb {
        let mut pipe = redis::pipe();
        for i in 0..1024 {
            pipe.set(format!("filler:{batch}:{i}"), &value).ignore();
        }
        pipe.exec_async(&mut conn).await?;
    }
    Ok(())
}

#[tokio::test]
async fn strict_mode_refuses_a_redis_that_may_evict_lock_keys() {
    let server = evicting_server();
    let strict = lock(&server, true);
    // Past the strict grace of a Redis started just now, the eviction refusal stays.
    let err = strict
        .try_acquire(
            "evictable",
            Token::generate().expect("token"),
            Duration::from_secs(30),
        )
        .await
        .expect_err("refused");
    let LockError::Backend {
        retryable: false,
        source,
        ..
    } = &err
    else {
        panic!("{err:?}");
    };
    let risk = source.downcast_ref::<EvictionRisk>().expect("EvictionRisk");
    assert_eq!(risk.policy, "allkeys-lru");
    assert_eq!(risk.maxmemory, 4 * 1024 * 1024);
}

#[test]
fn by_default_a_redis_that_may_evict_lock_keys_is_counted_and_still_used() {
    let recorder = DebuggingRecorder::new();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    metrics::with_local_recorder(&recorder, || {
        rt.block_on(async {
            let server = evicting_server();
            let holder = lock(&server, false);
            let Attempt::Acquired(_lease) = attempt(&holder, "evictable").await else {
                panic!("free");
            };
            fill(&server, 20)
                .await
                .expect("writes under allkeys-lru succeed");
            // The hazard the warning is about: the held lock's key was evicted, and a second
            // client is granted the lock while the first holds a 30 s lease.
            let other = lock(&server, false);
            assert!(
                matches!(attempt(&other, "evictable").await, Attempt::Acquired(_)),
                "the 20 MB of writes evicted the lock key"
            );
        });
    });
    let snapshot = snapshot(&recorder);
    assert!(
        counter(&snapshot, METRIC_EVICTION_RISK_TOTAL) >= 1,
        "{snapshot:?}"
    );
}

#[tokio::test]
async fn a_full_redis_under_noeviction_gives_a_retryable_error_not_a_grant() {
    let server = RedisServer::builder()
        .arg("--maxmemory")
        .arg("4mb")
        .arg("--maxmemory-policy")
        .arg("noeviction")
        .start()
        .expect("start redis-server");
    let err = fill(&server, 20).await.expect_err("the Redis fills up");
    assert!(err.to_string().contains("OOM"), "filling failed otherwise");
    let lock = lock(&server, false);
    let err = lock
        .try_acquire(
            "full",
            Token::generate().expect("token"),
            Duration::from_secs(30),
        )
        .await
        .expect_err("no grant on a full Redis");
    assert!(
        matches!(
            err,
            LockError::Backend {
                retryable: true,
                ..
            }
        ),
        "{err:?}"
    );
}
