//! The primitives against a real member: grant, busy, fencing, release, extend, hand-over.

use std::time::Duration;

use lock_core::backend::{Attempt, Handover, Lock};
use lock_core::{Kind, Token};

use crate::common::{lock_on, one_member};

const TTL: Duration = Duration::from_secs(5);

#[tokio::test]
async fn grant_busy_release_and_increasing_fence() {
    let cluster = one_member();
    let lock = lock_on(&cluster);
    let first = Token::generate().expect("rng");
    let Attempt::Acquired(lease) = lock.try_acquire("n", first, TTL).await.expect("answers") else {
        panic!("a free name was busy");
    };
    assert!(lease.fencing_token() > 0);
    let other = Token::generate().expect("rng");
    match lock.try_acquire("n", other, TTL).await.expect("answers") {
        Attempt::Busy {
            holder_ttl,
            announces,
        } => {
            assert!(announces, "a distlock holder announces");
            let ttl = holder_ttl.expect("a leased holder has a TTL");
            assert!(ttl <= TTL && ttl >= Duration::from_secs(3), "{ttl:?}");
        }
        Attempt::Acquired(l) => panic!("granted twice: {l:?}"),
    }
    assert!(lock.extend(&lease, TTL).await.expect("answers").is_some());
    assert!(lock.release(&lease).await.expect("answers"));
    assert!(
        !lock.release(&lease).await.expect("answers"),
        "released twice"
    );
    assert!(lock.extend(&lease, TTL).await.expect("answers").is_none());
    let Attempt::Acquired(second) = lock.try_acquire("n", other, TTL).await.expect("answers")
    else {
        panic!("a released name was busy");
    };
    assert!(second.fencing_token() > lease.fencing_token());
    let to = Token::generate().expect("rng");
    let Handover::Handed(third) = lock.hand_over(&second, to, TTL).await.expect("answers") else {
        panic!("hand-over refused");
    };
    assert!(third.fencing_token() > second.fencing_token());
    assert!(
        !lock.release(&second).await.expect("answers"),
        "the old token still held it"
    );
    assert!(lock.release(&third).await.expect("answers"));
}

#[tokio::test]
async fn a_name_in_distlocks_own_key_spaces_is_refused() {
    let cluster = one_member();
    let lock = lock_on(&cluster);
    for name in ["\0sem/1:n/", "\0note/1:n/", "\0"] {
        let token = Token::generate().expect("rng");
        match lock.try_acquire(name, token, TTL).await {
            Err(lock_core::LockError::InvalidInput { .. }) => {}
            other => panic!("{name:?}: expected InvalidInput, got {other:?}"),
        }
    }
    // A NUL further in is an ordinary byte of the name.
    let token = Token::generate().expect("rng");
    let Attempt::Acquired(lease) = lock.try_acquire("a\0b", token, TTL).await.expect("answers")
    else {
        panic!("a free name was busy");
    };
    assert!(lock.release(&lease).await.expect("answers"));
}

#[tokio::test]
async fn a_loopback_cluster_serves_a_lock() {
    // What the demo, the leader example and the load tool start: no namespace, no privilege.
    let cluster = lock_testkit::EtcdCluster::builder()
        .network(lock_testkit::EtcdNetwork::Loopback)
        .start()
        .expect("start on loopback");
    assert!(cluster.endpoints()[0].starts_with("http://127.0.0.1:"));
    let lock = lock_on(&cluster);
    let token = Token::generate().expect("rng");
    let Attempt::Acquired(lease) = lock.try_acquire("n", token, TTL).await.expect("answers") else {
        panic!("a free name was busy");
    };
    let other = Token::generate().expect("rng");
    assert!(matches!(
        lock.try_acquire("n", other, TTL).await.expect("answers"),
        Attempt::Busy { .. }
    ));
    assert!(lock.release(&lease).await.expect("answers"));
}

/// A queued fair waiter's attempts, back to back with one token, all answer busy while the
/// lock is held (none fails on the etcd lease its previous attempt left behind: a failed
/// attempt costs a waiter its place), and the waiter keeps its place: once the holder
/// releases, the waiter queued after it is refused until it has had its turn.
#[tokio::test]
async fn a_fair_waiter_keeps_its_place_through_back_to_back_attempts() {
    let cluster = one_member();
    let lock = lock_on(&cluster);
    let fair = Kind::Fair { queued: true };
    let attempt = |token| lock.try_acquire_kind("queue", fair, token, TTL);
    let Attempt::Acquired(held) = attempt(Token::generate().expect("rng"))
        .await
        .expect("answers")
    else {
        panic!("a free name was busy");
    };
    let (first, second) = (
        Token::generate().expect("rng"),
        Token::generate().expect("rng"),
    );
    for round in 0..30 {
        for token in [first, second] {
            let answer = attempt(token).await;
            assert!(
                matches!(answer, Ok(Attempt::Busy { .. })),
                "round {round}: {answer:?}"
            );
        }
    }
    assert!(lock.release(&held).await.expect("answers"));
    let early = attempt(second).await.expect("answers");
    assert!(
        matches!(early, Attempt::Busy { .. }),
        "the second waiter went first: {early:?}"
    );
    let Attempt::Acquired(turn) = attempt(first).await.expect("answers") else {
        panic!("the head of the queue was refused a free lock");
    };
    assert!(lock.release(&turn).await.expect("answers"));
    let Attempt::Acquired(next) = attempt(second).await.expect("answers") else {
        panic!("the next waiter was refused a free lock");
    };
    assert!(lock.release(&next).await.expect("answers"));
}
