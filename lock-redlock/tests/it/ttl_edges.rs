//! TTL edge cases on real servers: a TTL too short for any validity is refused before any I/O;
//! a barely long enough one never panics nor yields an expired lease; the longest works.

use std::time::Duration;

use lock_core::backend::{Attempt, Lock};
use lock_core::{LockError, MAX_TTL, Token};
use lock_redlock::ValidityExpired;
use tokio::time::Instant;

use crate::common::memory::quorum_error;
use crate::common::servers::Nodes;

fn token() -> Token {
    Token::generate().expect("rng")
}

#[tokio::test]
async fn too_short_is_refused_before_any_io() {
    let nodes = Nodes::start(3);
    let redlock = nodes.redlock();
    for ttl in [Duration::from_millis(1), Duration::from_millis(2)] {
        let error = redlock
            .try_acquire("edge", token(), ttl)
            .await
            .expect_err("no validity possible");
        assert!(matches!(error, LockError::InvalidInput { .. }), "{error:?}");
    }
    for i in 0..3 {
        assert!(!nodes.exists(i, "edge").await);
        assert_eq!(nodes.fence(i, "edge").await, None, "nothing was sent");
    }
}

#[tokio::test]
async fn barely_long_enough_never_yields_an_expired_lease() {
    let nodes = Nodes::start(3);
    let redlock = nodes.redlock();
    let ttl = Duration::from_millis(3); // 0.97 ms of validity at best
    let (mut granted, mut refused) = (0, 0);
    for i in 0..50 {
        let started = Instant::now();
        match redlock
            .try_acquire(&format!("edge-{i}"), token(), ttl)
            .await
        {
            Ok(Attempt::Acquired(lease)) => {
                granted += 1;
                // Valid for ttl − drift from a start within the call: never longer than the
                // keys the nodes set during it.
                let usable = ttl - redlock.drift(ttl);
                let implied_start = lease.valid_until() - usable;
                assert!(implied_start >= started && implied_start <= Instant::now());
                let _ = redlock.release(&lease).await;
            }
            Ok(Attempt::Busy { .. }) => panic!("fresh names are never busy"),
            Err(error) => {
                refused += 1;
                let source = std::error::Error::source(&error);
                assert!(
                    quorum_error(&error).is_some()
                        || source.is_some_and(|s| s.is::<ValidityExpired>()),
                    "{error:?}"
                );
            }
        }
    }
    assert_eq!(granted + refused, 50);
}

#[tokio::test]
async fn the_longest_ttl_works() {
    let nodes = Nodes::start(3);
    let redlock = nodes.redlock();
    let Attempt::Acquired(lease) = redlock
        .try_acquire("forever", token(), MAX_TTL)
        .await
        .expect("ok")
    else {
        panic!("granted")
    };
    assert!(lease.remaining() > MAX_TTL / 100 * 98);
    for i in 0..3 {
        // The acquire answered at the quorum: the last node's grant may still be on its way.
        let mut pttl = nodes.pttl(i, "forever").await;
        for _ in 0..500 {
            if pttl != -2 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
            pttl = nodes.pttl(i, "forever").await;
        }
        assert!(pttl > 1 << 52, "node {i}: PTTL {pttl}");
    }
    assert!(redlock.release(&lease).await.expect("ok"));
    assert!(nodes.wait_gone(&[0, 1, 2], "forever").await);
}
