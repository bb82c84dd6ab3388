//! Renewed grants share one etcd lease per `EtcdLock`; a grant of a fixed TTL goes on another,
//! a bucket lease never kept alive (`fixed_lease.rs` has its own checks). A guard on the shared
//! lease is lost when its key is gone or carries another token, which the renewal's read of
//! every key sees, not only when the lease runs out.

use std::time::Duration;

use etcd_client::GetOptions;
use lock_core::backend::{Attempt, Lock};
use lock_core::{Locker, Token};
use lock_etcd::EtcdLock;

use crate::common::{lock_on, one_member};

const TTL: Duration = Duration::from_secs(6);

/// The etcd lease the key of `name` is on (0: none, or no key).
async fn lease_of(lock: &EtcdLock, name: &str) -> i64 {
    let client = lock.client().await.expect("client");
    let got = client
        .kv_client()
        .get(lock.key(name), Some(GetOptions::new()))
        .await
        .expect("get");
    got.kvs().first().map_or(0, etcd_client::KeyValue::lease)
}

fn granted(attempt: Attempt) -> lock_core::Lease {
    match attempt {
        Attempt::Acquired(lease) => lease,
        Attempt::Busy { .. } => panic!("a free name was busy"),
    }
}

#[tokio::test]
async fn renewed_grants_share_a_lease_and_a_fixed_grant_is_not_on_it() {
    let cluster = one_member();
    let lock = lock_on(&cluster);
    let token = || Token::generate().expect("rng");
    let a = granted(
        lock.try_acquire_renewed("a", token(), TTL)
            .await
            .expect("a"),
    );
    let b = granted(
        lock.try_acquire_renewed("b", token(), TTL)
            .await
            .expect("b"),
    );
    let fixed = granted(lock.try_acquire("f", token(), TTL).await.expect("f"));
    let (la, lb, lf) = (
        lease_of(&lock, "a").await,
        lease_of(&lock, "b").await,
        lease_of(&lock, "f").await,
    );
    assert!(la != 0 && la == lb, "renewed grants share one lease");
    assert!(
        lf != 0 && lf != la,
        "a fixed grant is not on the shared lease"
    );

    // A release deletes the key only: the other grant on the shared lease stays.
    assert!(lock.release(&a).await.expect("release a"));
    assert_eq!(lease_of(&lock, "a").await, 0);
    assert_eq!(lease_of(&lock, "b").await, lb, "b kept its key and lease");

    // A key deleted behind the holder's back (`distlock release --force`) is seen lost by the
    // next renewal, while its neighbour on the same lease is kept.
    let again = granted(
        lock.try_acquire_renewed("a", token(), TTL)
            .await
            .expect("a"),
    );
    let client = lock.client().await.expect("client");
    client
        .kv_client()
        .delete(lock.key("a"), None)
        .await
        .expect("forced delete");
    let answers = lock
        .extend_many(&[(again, TTL), (b.clone(), TTL), (fixed.clone(), TTL)])
        .await;
    let kept: Vec<bool> = answers
        .into_iter()
        .map(|answer| answer.expect("answers").is_some())
        .collect();
    assert_eq!(kept, [false, true, true], "only the deleted key is lost");
    assert!(lock.release(&b).await.expect("release b"));
    assert!(lock.release(&fixed).await.expect("release f"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guard_whose_key_is_deleted_fires_lost_at_the_next_renewal() {
    let cluster = one_member();
    let lock = lock_on(&cluster);
    let locker = Locker::builder(lock.clone()).build();
    // Renewed every third of the lease: 1 s.
    let lease = Duration::from_secs(3);
    let gone = locker.lock("gone").lease(lease).await.expect("grant");
    let kept = locker.lock("kept").lease(lease).await.expect("grant");
    let client = lock.client().await.expect("client");
    client
        .kv_client()
        .delete(lock.key("gone"), None)
        .await
        .expect("forced delete");
    // One renewal period, and generous room for a loaded machine; the shared lease itself
    // is kept alive by the same renewals, so only the deleted key's guard is lost.
    tokio::time::timeout(Duration::from_secs(10), gone.lost())
        .await
        .expect("lost() fires once the renewal reads the key gone");
    assert!(
        tokio::time::timeout(Duration::from_secs(4), kept.lost())
            .await
            .is_err(),
        "the neighbour on the same shared lease is not lost"
    );
    kept.release().await.expect("released");
}
