//! The documented layouts of the read-write lock and the semaphore: which keys hold what, with
//! which expiry, and that nothing is left once the holders are gone.

use std::time::Duration;

use lock_core::{Kind, LockError};
use redis::aio::MultiplexedConnection;

use crate::common::{exists, lock_on, locker_on, pttl, raw, server, token_of};

async fn zscore(conn: &mut MultiplexedConnection, key: &str, member: &str) -> Option<f64> {
    redis::cmd("ZSCORE")
        .arg(key)
        .arg(member)
        .query_async(conn)
        .await
        .expect("ZSCORE")
}

async fn server_ms(conn: &mut MultiplexedConnection) -> f64 {
    let (secs, micros): (u64, u64) = redis::cmd("TIME").query_async(conn).await.expect("TIME");
    (secs * 1000 + micros / 1000) as f64
}

/// Asserts that `member` of the sorted set `key` is scored to expire in about `ms` (server
/// clock), within 1 s below.
async fn assert_expires_in(conn: &mut MultiplexedConnection, key: &str, member: &str, ms: f64) {
    let now = server_ms(conn).await;
    let at = zscore(conn, key, member).await.expect("a member");
    assert!(
        (ms - 1_000.0..=ms + 100.0).contains(&(at - now)),
        "{} for {ms}",
        at - now
    );
}

#[tokio::test]
async fn readers_are_members_scored_by_their_own_expiry() {
    let server = server();
    let (locker, lock) = (locker_on(&server), lock_on(&server));
    let mut conn = raw(&server).await;
    let read = Kind::Read {
        writer_preference: true,
    };
    let keys = lock.lock_keys("doc:7").of_kind(read);
    let (writer, readers, waiting) = (&keys[0], &keys[1], &keys[2]);
    assert!(writer.ends_with(":distlock-writer"), "{keys:?}");

    let short = locker
        .read("doc:7")
        .fixed_ttl(Duration::from_secs(5))
        .await
        .expect("free");
    let long = locker
        .read("doc:7")
        .fixed_ttl(Duration::from_secs(50))
        .await
        .expect("readers share");
    let long_at = zscore(&mut conn, readers, &token_of(&long))
        .await
        .expect("a member");
    assert_expires_in(&mut conn, readers, &token_of(&short), 5_000.0).await;
    assert_expires_in(&mut conn, readers, &token_of(&long), 50_000.0).await;
    // The set expires with its last member, so abandoned readers leave nothing.
    let ttl = pttl(&mut conn, readers).await;
    assert!((49_000..=50_100).contains(&ttl), "{ttl}");
    assert!(!exists(&mut conn, writer).await && !exists(&mut conn, waiting).await);

    // Extending one reader moves its score and no other's (Redisson #7098, #2144).
    let mut short = short;
    short.extend(Duration::from_secs(20)).await.expect("ours");
    assert_expires_in(&mut conn, readers, &token_of(&short), 20_000.0).await;
    assert_eq!(
        zscore(&mut conn, readers, &token_of(&long)).await,
        Some(long_at),
        "the other reader's expiry is untouched"
    );

    short.release().await.expect("ours");
    long.release().await.expect("ours");
    assert!(
        !exists(&mut conn, readers).await,
        "the last reader's release empties the set"
    );
}

#[tokio::test]
async fn the_writer_is_a_string_key_and_a_waiting_writer_is_recorded_until_it_gives_up() {
    let server = server();
    let (locker, lock) = (locker_on(&server), lock_on(&server));
    let mut conn = raw(&server).await;
    let keys = lock.lock_keys("doc:8").of_kind(Kind::Write {
        writer_preference: true,
    });
    let (writer, waiting) = (keys[0].clone(), keys[2].clone());

    let reader = locker.read("doc:8").await.expect("free");
    let waiter = {
        let locker = locker.clone();
        tokio::spawn(async move {
            locker
                .write("doc:8")
                .wait(Duration::from_millis(600))
                .await
                .map(drop)
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let recorded: i64 = redis::cmd("ZCARD")
        .arg(&waiting)
        .query_async(&mut conn)
        .await
        .expect("ZCARD");
    assert_eq!(recorded, 1, "the busy writer recorded that it waits");
    assert!(
        locker
            .read("doc:8")
            .try_acquire()
            .await
            .expect("answers")
            .is_none(),
        "a new reader queues behind the waiting writer"
    );
    let answer = waiter.await.expect("no panic");
    assert!(
        matches!(answer, Err(LockError::Timeout { .. })),
        "{answer:?}"
    );
    // The writer that gave up withdrew its record (in the background).
    let mut left = true;
    for _ in 0..50 {
        left = exists(&mut conn, &waiting).await;
        if !left {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!left, "a writer that gave up leaves no record");
    let second = locker.read("doc:8").try_acquire().await.expect("answers");
    assert!(second.is_some(), "readers get in again");
    drop(second);
    reader.release().await.expect("ours");

    let write = locker
        .write("doc:8")
        .fixed_ttl(Duration::from_secs(10))
        .await
        .expect("free");
    let value: Option<String> = redis::cmd("GET")
        .arg(&writer)
        .query_async(&mut conn)
        .await
        .expect("GET");
    assert_eq!(value, Some(token_of(&write)));
    let ttl = pttl(&mut conn, &writer).await;
    assert!((9_000..=10_000).contains(&ttl), "{ttl}");
    write.release().await.expect("ours");
    assert!(!exists(&mut conn, &writer).await);
}

#[tokio::test]
async fn a_read_carries_the_last_writes_fencing_token() {
    let server = server();
    let locker = locker_on(&server);
    let first_read = locker.read("ledger").await.expect("free");
    first_read.release().await.expect("ours");
    let write = locker.write("ledger").await.expect("free");
    let written = write.fencing_token();
    write.release().await.expect("ours");
    let read = locker.read("ledger").await.expect("free");
    assert_eq!(read.fencing_token(), written, "the last write's token");
    read.release().await.expect("ours");
    let next = locker.write("ledger").await.expect("free");
    assert!(next.fencing_token() > written);
    next.release().await.expect("ours");
}

#[tokio::test]
async fn permits_are_members_with_their_count_and_vanish_with_the_last_holder() {
    let server = server();
    let (locker, lock) = (locker_on(&server), lock_on(&server));
    let mut conn = raw(&server).await;
    let keys = lock
        .lock_keys("pdf")
        .of_kind(Kind::Semaphore { permits: 1, max: 4 });
    let (holders, counts) = (&keys[0], &keys[1]);
    let three = locker
        .semaphore("pdf", 4)
        .permits(3)
        .fixed_ttl(Duration::from_secs(10))
        .await
        .expect("free");
    let fields: std::collections::HashMap<String, String> = redis::cmd("HGETALL")
        .arg(counts)
        .query_async(&mut conn)
        .await
        .expect("HGETALL");
    assert_eq!(fields.get("max").map(String::as_str), Some("4"));
    assert_eq!(fields.get("used").map(String::as_str), Some("3"));
    assert_eq!(fields.get(&token_of(&three)).map(String::as_str), Some("3"));
    assert!(
        zscore(&mut conn, holders, &token_of(&three))
            .await
            .is_some()
    );
    let ttl = pttl(&mut conn, counts).await;
    assert!((9_000..=10_000).contains(&ttl), "{ttl}");
    assert_eq!(
        locker
            .semaphore("pdf", 4)
            .available()
            .await
            .expect("answers"),
        1
    );

    // Two more do not fit; another count is refused while permits are held.
    assert!(
        locker
            .semaphore("pdf", 4)
            .permits(2)
            .try_acquire()
            .await
            .expect("answers")
            .is_none()
    );
    let mismatch = locker.semaphore("pdf", 5).try_acquire().await;
    assert!(
        matches!(
            mismatch,
            Err(LockError::PermitsMismatch {
                max: 5,
                held_max: 4,
                ..
            })
        ),
        "{mismatch:?}"
    );
    three.release().await.expect("ours");
    assert!(!exists(&mut conn, holders).await && !exists(&mut conn, counts).await);
    // Nobody holds it now: the next holder's count stands.
    let five = locker.semaphore("pdf", 5).permits(5).await.expect("free");
    five.release().await.expect("ours");
}

#[tokio::test]
async fn expired_holders_are_pruned_and_their_permits_returned() {
    let server = server();
    let locker = locker_on(&server);
    let leaked = locker
        .semaphore("jobs", 2)
        .permits(2)
        .fixed_ttl(Duration::from_millis(300))
        .await
        .expect("free")
        .leak(); // as a crashed holder would: never released
    assert_eq!(leaked.kind(), Kind::Semaphore { permits: 2, max: 2 });
    assert_eq!(
        locker
            .semaphore("jobs", 2)
            .available()
            .await
            .expect("answers"),
        0
    );
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(
        locker
            .semaphore("jobs", 2)
            .available()
            .await
            .expect("answers"),
        2,
        "the expired holder's permits came back"
    );
    let both = locker
        .semaphore("jobs", 2)
        .permits(2)
        .try_acquire()
        .await
        .expect("answers");
    assert!(both.is_some());
}

#[tokio::test]
async fn keys_of_the_wrong_type_are_a_typed_error() {
    let server = server();
    let (locker, lock) = (locker_on(&server), lock_on(&server));
    let mut conn = raw(&server).await;
    let readers = lock.lock_keys("bad").of_kind(Kind::Read {
        writer_preference: true,
    })[1]
        .clone();
    let permits = lock
        .lock_keys("bad")
        .of_kind(Kind::Semaphore { permits: 1, max: 1 })[0]
        .clone();
    for key in [&readers, &permits] {
        let () = redis::cmd("SET")
            .arg(key)
            .arg("not a set")
            .query_async(&mut conn)
            .await
            .expect("SET");
    }
    let read = locker.read("bad").try_acquire().await;
    assert!(matches!(read, Err(LockError::WrongType { .. })), "{read:?}");
    let permit = locker.semaphore("bad", 1).try_acquire().await;
    assert!(
        matches!(permit, Err(LockError::WrongType { .. })),
        "{permit:?}"
    );
    let value: String = redis::cmd("GET")
        .arg(&readers)
        .query_async(&mut conn)
        .await
        .expect("GET");
    assert_eq!(value, "not a set", "nothing was overwritten");
}

#[tokio::test]
async fn flushed_scripts_are_loaded_again() {
    let server = server();
    let locker = locker_on(&server);
    let mut conn = raw(&server).await;
    let guard = locker.read("flushed").await.expect("free");
    let () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(&mut conn)
        .await
        .expect("FLUSH");
    guard.release().await.expect("released after the reload");
    let permit = locker.semaphore("flushed", 1).await.expect("free");
    let () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(&mut conn)
        .await
        .expect("FLUSH");
    permit.release().await.expect("released after the reload");
}
