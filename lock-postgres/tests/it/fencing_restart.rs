//! Fencing tokens keep increasing across a server restart (an immediate shutdown, as in a
//! crash), through the same `PostgresLock`, which reconnects by itself.

use crate::common;

use std::time::Duration;

use lock_core::backend::{Attempt, Lock};
use lock_core::{Lease, Token};
use lock_postgres::PostgresLock;
use lock_testkit::PostgresServer;

const TTL: Duration = Duration::from_secs(30);

/// Acquires `name`, retrying (bounded) the retryable errors of a connection the restart broke.
async fn acquire(lock: &PostgresLock, name: &str) -> Lease {
    let mut last = None;
    for _ in 0..20 {
        match lock
            .try_acquire(name, Token::generate().expect("token"), TTL)
            .await
        {
            Ok(Attempt::Acquired(lease)) => return lease,
            Ok(Attempt::Busy { .. }) => panic!("{name} is busy"),
            Err(error) => {
                assert!(error.is_retryable(), "{error}");
                last = Some(error);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    panic!("no grant after the restart: {last:?}");
}

/// `durable`: commits survive the crash (`synchronous_commit = on`), so a lease held across it
/// is still held afterwards. Without it the last commits, grants among them, may be lost.
async fn tokens_increase_across_a_restart(mut server: PostgresServer, durable: bool) {
    let lock = common::lock(&server).await;
    // The table, at least, was created long before the crash: flushed.
    common::client(&server.url())
        .await
        .batch_execute("CHECKPOINT")
        .await
        .expect("checkpoint");
    let first = acquire(&lock, "released").await;
    assert!(lock.release(&first).await.expect("release"));
    let second = acquire(&lock, "released").await;
    assert!(second.fencing_token() > first.fencing_token());
    assert!(lock.release(&second).await.expect("release"));
    let held = acquire(&lock, "held").await; // never released: the restart finds it held

    server.stop();
    server.start_again().expect("start again");

    if !durable {
        // A grant may have survived the crash while its release was lost (which of the last
        // commits reach the disk depends on where the WAL writer happened to flush): the name
        // is then held again by that grant, and freed by its release.
        for lease in [&first, &second] {
            // Retried while the restart's broken connections are thrown away.
            for _ in 0..20 {
                match lock.release(lease).await {
                    Ok(_) => break,
                    Err(error) => assert!(error.is_retryable(), "{error}"),
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    let third = acquire(&lock, "released").await;
    assert!(
        third.fencing_token() > second.fencing_token(),
        "{} after {}",
        third.fencing_token(),
        second.fencing_token()
    );
    if !durable {
        // The grant of "held" may be lost (then the name is free again, with a greater token
        // for the next holder) or kept (then it is still held).
        match lock
            .try_acquire("held", Token::generate().expect("token"), TTL)
            .await
            .expect("after the restart")
        {
            Attempt::Acquired(after) => assert!(after.fencing_token() > held.fencing_token()),
            Attempt::Busy { .. } => assert!(lock.release(&held).await.expect("release held")),
        }
        return;
    }
    // The lease held across the restart is still held, and still ours.
    assert!(matches!(
        lock.try_acquire("held", Token::generate().expect("token"), TTL)
            .await
            .expect("busy"),
        Attempt::Busy { .. }
    ));
    assert!(lock.release(&held).await.expect("release held"));
    let after = acquire(&lock, "held").await;
    assert!(after.fencing_token() > held.fencing_token());
}

#[tokio::test]
async fn fencing_tokens_increase_across_a_crash_and_restart() {
    tokens_increase_across_a_restart(common::server(), true).await;
}

/// With `synchronous_commit = off` the last commits (grants and releases) may be lost in a
/// crash; the tokens' clock floor still keeps them increasing (see the crate docs).
#[tokio::test]
async fn fencing_tokens_increase_with_synchronous_commit_off() {
    let server = PostgresServer::builder()
        .setting("synchronous_commit", "off")
        .start()
        .expect("start postgres");
    tokens_increase_across_a_restart(server, false).await;
}
