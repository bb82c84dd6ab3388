//! Rows about what is (or is not) on the server: keys of the wrong type, flushed scripts, and
//! leases that are no longer (or never were) ours.

use std::time::Duration;

use lock_core::backend::Lock;
use lock_core::{Lease, Locker, Token};
use lock_redis::RedisLock;

use super::harness::{Answer, Case, Env, Expect, lock_at, row};
use super::ops::{extend_then_release, hold, must, owned, release, try_once};

/// Plants `args` (a write command on key `a`), tries to lock `a`, and checks the planted value
/// survived: a foreign key is reported, never overwritten.
async fn over_foreign_key(env: &Env, args: &[&str], dump: &[&str]) -> super::harness::Outcome {
    env.cmd(args).await;
    let before = dump_value(env, dump).await;
    let outcome = try_once(env.subject.lock("a")).await;
    assert_eq!(
        dump_value(env, dump).await,
        before,
        "the foreign key is intact"
    );
    outcome
}

async fn dump_value(env: &Env, args: &[&str]) -> redis::Value {
    let mut cmd = redis::cmd(args[0]);
    for arg in &args[1..] {
        cmd.arg(*arg);
    }
    cmd.query_async(&mut env.raw().await)
        .await
        .expect("read back")
}

async fn script_flush(env: &Env) {
    env.cmd(&["SCRIPT", "FLUSH"]).await;
}

/// A lease on `a` that lapsed and whose name another client then took.
async fn stale_lease(env: &Env) -> (lock_core::Guard, lock_core::Guard) {
    let stale = hold(&env.subject, "a", Duration::from_millis(50)).await;
    tokio::time::sleep(Duration::from_millis(120)).await;
    let other = hold(&env.other(), "a", Duration::from_secs(5)).await;
    (stale, other)
}

pub(crate) fn cases() -> Vec<Case> {
    vec![
        row(
            "foreign string without TTL at the lock key",
            "SET a someone-else",
            Expect::Ok(Answer::Busy),
            run!(|env| {
                over_foreign_key(&env, &["SET", "a", "someone-else"], &["GET", "a"]).await
            }),
        ),
        row(
            "hash at the lock key",
            "HSET a f v",
            Expect::WrongType,
            run!(|env| {
                over_foreign_key(&env, &["HSET", "a", "f", "v"], &["HGETALL", "a"]).await
            }),
        ),
        row(
            "list at the lock key",
            "RPUSH a x",
            Expect::WrongType,
            run!(|env| {
                over_foreign_key(&env, &["RPUSH", "a", "x"], &["LRANGE", "a", "0", "-1"]).await
            }),
        ),
        row(
            "set at the lock key",
            "SADD a x",
            Expect::WrongType,
            run!(|env| { over_foreign_key(&env, &["SADD", "a", "x"], &["SMEMBERS", "a"]).await }),
        ),
        row(
            "sorted set at the lock key",
            "ZADD a 1 x",
            Expect::WrongType,
            run!(|env| {
                over_foreign_key(&env, &["ZADD", "a", "1", "x"], &["ZRANGE", "a", "0", "-1"]).await
            }),
        ),
        row(
            "stream at the lock key",
            "XADD a * f v",
            Expect::WrongType,
            run!(|env| {
                over_foreign_key(&env, &["XADD", "a", "*", "f", "v"], &["XLEN", "a"]).await
            }),
        ),
        row(
            "wrong-type fencing counter",
            "RPUSH {a}:distlock-fence x",
            Expect::WrongType,
            run!(|env| {
                let fence = RedisLock::from_url(&env.url).expect("url").fence_key("a");
                env.cmd(&["RPUSH", &fence, "x"]).await;
                // The leak check then shows the grant was undone: no lock without a fencing token.
                try_once(env.subject.lock("a")).await
            }),
        ),
        row(
            "release where a hash now sits",
            "lease on a; HSET a f v; release",
            Expect::WrongType,
            run!(|env| {
                let guard = hold(&env.subject, "a", Duration::from_secs(5)).await;
                let lease = guard.leak();
                env.cmd(&["DEL", "a"]).await;
                env.cmd(&["HSET", "a", "f", "v"]).await;
                owned(env.subject.release(&lease).await).map(Answer::Released)
            }),
        ),
        row(
            "extend where a list now sits",
            "lease on a; RPUSH a x; extend",
            Expect::WrongType,
            run!(|env| {
                let guard = hold(&env.subject, "a", Duration::from_secs(5)).await;
                let lease = guard.leak();
                env.cmd(&["DEL", "a"]).await;
                env.cmd(&["RPUSH", "a", "x"]).await;
                env.subject
                    .backend_lock()
                    .extend(&lease, Duration::from_secs(5))
                    .await
                    .map(|_| Answer::Granted)
            }),
        ),
        row(
            "scripts flushed before acquire",
            "SCRIPT FLUSH; acquire",
            Expect::Ok(Answer::Granted),
            run!(|env| {
                super::ops::warm_up(&env.subject).await;
                script_flush(&env).await;
                try_once(env.subject.lock("a")).await
            }),
        ),
        row(
            "scripts flushed before extend",
            "acquire; SCRIPT FLUSH; extend",
            Expect::Ok(Answer::Granted),
            run!(|env| {
                let guard = hold(&env.subject, "a", Duration::from_secs(5)).await;
                script_flush(&env).await;
                extend_then_release(guard, Duration::from_secs(5)).await
            }),
        ),
        row(
            "scripts flushed before release",
            "acquire; SCRIPT FLUSH; release",
            Expect::Ok(Answer::Granted),
            run!(|env| {
                let guard = hold(&env.subject, "a", Duration::from_secs(5)).await;
                script_flush(&env).await;
                release(guard).await
            }),
        ),
        row(
            "stale lease released",
            "lease lapsed, another holder; release",
            Expect::Ok(Answer::Released(false)),
            run!(|env| {
                let (stale, other) = stale_lease(&env).await;
                let outcome = owned(stale.release().await).map(Answer::Released);
                assert!(
                    must("the new holder still holds", owned(other.release().await)),
                    "left intact"
                );
                outcome
            }),
        ),
        row(
            "stale lease extended",
            "lease lapsed, another holder; extend",
            Expect::NotOwned,
            run!(|env| {
                let (mut stale, other) = stale_lease(&env).await;
                let outcome = stale
                    .extend(Duration::from_secs(5))
                    .await
                    .map(|()| Answer::Granted);
                assert!(!must(
                    "releasing the stale lease",
                    owned(stale.release().await)
                ));
                assert!(
                    must("the new holder still holds", owned(other.release().await)),
                    "left intact"
                );
                outcome
            }),
        ),
        row(
            "lease released twice",
            "release; release the same lease",
            Expect::Ok(Answer::Released(false)),
            run!(|env| {
                let guard = hold(&env.subject, "a", Duration::from_secs(5)).await;
                let lease = guard.lease();
                assert!(must("first release", owned(guard.release().await)));
                owned(env.subject.release(&lease).await).map(Answer::Released)
            }),
        ),
        row(
            "forged token",
            "a lease with a fresh random token on a held name",
            Expect::Ok(Answer::Released(false)),
            run!(|env| {
                let holder = hold(&env.other(), "a", Duration::from_secs(5)).await;
                let forged = Lease::new(
                    "a",
                    Token::generate().expect("os rng"),
                    1,
                    tokio::time::Instant::now(),
                );
                let outcome = owned(env.subject.release(&forged).await).map(Answer::Released);
                assert!(
                    must("the real holder still holds", owned(holder.release().await)),
                    "left intact"
                );
                outcome
            }),
        ),
        row(
            "lease from another prefix",
            "lease of prefix p1: released through prefix p2",
            Expect::Ok(Answer::Released(false)),
            run!(|env| {
                let p1 = Locker::new(
                    RedisLock::builder()
                        .url(env.url.as_str())
                        .prefix("p1:")
                        .build()
                        .expect("url"),
                );
                let p2 = Locker::new(
                    RedisLock::builder()
                        .url(env.url.as_str())
                        .prefix("p2:")
                        .build()
                        .expect("url"),
                );
                let guard = hold(&p1, "a", Duration::from_secs(5)).await;
                let outcome = owned(p2.release(&guard.lease()).await).map(Answer::Released);
                assert!(
                    must("p1 still holds", owned(guard.release().await)),
                    "left intact"
                );
                outcome
            }),
        ),
        row(
            "lease from another server's locker",
            "lease taken on server 1, released on server 2",
            Expect::Ok(Answer::Released(false)),
            run!(|env| {
                let elsewhere = lock_testkit::RedisServer::start().expect("a second server");
                let there = Locker::new(lock_at(&elsewhere.url()));
                let guard = hold(&there, "a", Duration::from_secs(5)).await;
                let outcome =
                    owned(env.subject.release(&guard.lease()).await).map(Answer::Released);
                assert!(must("still held on server 1", owned(guard.release().await)));
                outcome
            }),
        ),
        row(
            "Redis restarted empty under a holder",
            "hold; restart without data; release",
            Expect::Ok(Answer::Released(false)),
            run!(|env| {
                let guard = hold(&env.subject, "a", Duration::from_secs(5)).await;
                let lease = guard.lease();
                env.server()
                    .restart(lock_testkit::KeepData::Discard)
                    .expect("restart");
                // The first command after the restart may meet the dead connection (a retryable
                // error); retried, as a caller would, the release is answered by a fresh one.
                match owned(guard.release().await) {
                    Err(e) if e.is_retryable() => {
                        owned(env.subject.release(&lease).await).map(Answer::Released)
                    }
                    other => other.map(Answer::Released),
                }
            }),
        ),
    ]
}
