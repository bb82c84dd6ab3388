//! Grants of a fixed TTL share bucket leases (`fixed_lease.rs`): one etcd lease per TTL and
//! bucket, never kept alive. What a user checks: many fixed grants make one etcd lease; a
//! holder that never releases loses its key no sooner than its TTL after its request and no
//! later than a bucket more (and etcd's expiry tick); a release deletes the key at once; an
//! extend by hand moves the grant to a lease of its own, which outlives the bucket lease and
//! keeps the grant's term for held transactions and observers.

use std::time::Duration;

use etcd_client::{KeyValue, TxnOp};
use lock_core::backend::{Attempt, Lock};
use lock_core::{Lease, Locker, Token};
use lock_etcd::EtcdLock;
use tokio::time::Instant;

use crate::common::{lock_on, one_member};

/// How often a test looks at etcd while it waits for a key to go.
const POLL: Duration = Duration::from_millis(50);
/// The most polls of [`POLL`] a test makes before it gives up (30 s).
const POLLS: u32 = 600;
/// Room for etcd's expiry check (every 500 ms), its revoke and a loaded machine, beyond the
/// bound the docs state: a generous upper bound, not a timing of the store.
const SLACK: Duration = Duration::from_millis(2_500);

fn token() -> Token {
    Token::generate().expect("rng")
}

fn granted(attempt: Attempt) -> Lease {
    match attempt {
        Attempt::Acquired(lease) => lease,
        Attempt::Busy { .. } => panic!("a free name was busy"),
    }
}

/// The lock key of `name` as stored, if any.
async fn key_of(lock: &EtcdLock, name: &str) -> Option<KeyValue> {
    let mut kv = lock.client().await.expect("client").kv_client();
    let answer = kv.get(lock.key(name), None).await.expect("get");
    answer.kvs().first().cloned()
}

/// The ids of every etcd lease the member has.
async fn leases(lock: &EtcdLock) -> Vec<i64> {
    let mut client = lock.client().await.expect("client");
    let answer = client.leases().await.expect("lease list");
    answer.leases().iter().map(|l| l.id()).collect()
}

/// Polls (bounded) until the lock key of `name` is gone: when it was first seen gone.
async fn gone_at(lock: &EtcdLock, name: &str) -> Instant {
    for _ in 0..POLLS {
        if key_of(lock, name).await.is_none() {
            return Instant::now();
        }
        tokio::time::sleep(POLL).await;
    }
    panic!("the key of {name:?} never went");
}

#[tokio::test]
async fn fixed_grants_in_one_bucket_share_one_etcd_lease_and_release_at_once() {
    let cluster = one_member();
    let lock = lock_on(&cluster);
    // 30 s: a bucket of 4 s.
    let ttl = Duration::from_secs(30);
    let before = leases(&lock).await;
    let started = Instant::now();
    let mut held = Vec::new();
    for n in 0..20 {
        let name = format!("f{n}");
        held.push(granted(
            lock.try_acquire(&name, token(), ttl)
                .await
                .expect("answers"),
        ));
    }
    let took = started.elapsed();
    let made: Vec<i64> = (leases(&lock).await.into_iter())
        .filter(|id| !before.contains(id))
        .collect();
    // One bucket lease; a machine so loaded that the grants spanned buckets makes one more
    // per bucket they spanned, never one per grant.
    let most = 1 + usize::try_from(took.as_secs() / 4).expect("small");
    assert!(
        !made.is_empty() && made.len() <= most,
        "20 fixed grants in {took:?} made {} etcd leases",
        made.len()
    );
    for lease in &held {
        let kv = key_of(&lock, lease.name()).await.expect("held");
        assert!(made.contains(&kv.lease()), "on a bucket lease");
    }
    // A release deletes the key at once: the name is free for another holder right away.
    for lease in &held {
        assert!(lock.release(lease).await.expect("release"));
        assert!(
            key_of(&lock, lease.name()).await.is_none(),
            "deleted at once"
        );
    }
    let next = granted(lock.try_acquire("f0", token(), ttl).await.expect("answers"));
    assert!(next.fencing_token() > held[0].fencing_token());
    assert!(lock.release(&next).await.expect("release"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_holders_key_goes_no_sooner_than_its_ttl_and_at_most_a_bucket_later() {
    let cluster = one_member();
    let lock = lock_on(&cluster);
    // 2 s (etcd's minimum with the kit's timing): a bucket of 1 s, a bucket lease of 3 s.
    let ttl = Duration::from_secs(2);
    let bucket = Duration::from_secs(1);
    // The first grant makes the bucket lease; the second, most of a bucket later, joins it
    // (on a loaded machine it may get a new one: the bounds hold either way). Neither is
    // released: their holders are dead.
    let first_started = Instant::now();
    let first = granted(lock.try_acquire("d1", token(), ttl).await.expect("answers"));
    assert!(
        first.valid_until() <= Instant::now() + ttl,
        "valid for the TTL at most"
    );
    tokio::time::sleep(bucket * 4 / 5).await;
    let second_started = Instant::now();
    let second = granted(lock.try_acquire("d2", token(), ttl).await.expect("answers"));
    assert!(
        second.valid_until() <= Instant::now() + ttl,
        "valid for the TTL at most"
    );
    // A contender is told no more than the TTL is left.
    match lock.try_acquire("d2", token(), ttl).await.expect("answers") {
        Attempt::Busy { holder_ttl, .. } => {
            let left = holder_ttl.expect("a leased holder has a TTL");
            assert!(left <= ttl, "{left:?}");
        }
        Attempt::Acquired(lease) => panic!("granted twice: {lease:?}"),
    }
    let (first_gone, second_gone) = tokio::join!(gone_at(&lock, "d1"), gone_at(&lock, "d2"));
    for (name, started, gone) in [
        ("d1", first_started, first_gone),
        ("d2", second_started, second_gone),
    ] {
        let lived = gone - started;
        assert!(
            lived >= ttl,
            "{name}: the key went {lived:?} after its request"
        );
        assert!(
            lived <= ttl + bucket + SLACK,
            "{name}: the key stayed {lived:?} after its request"
        );
    }
    // Gone by expiry: a contender gets the name.
    let next = granted(lock.try_acquire("d1", token(), ttl).await.expect("answers"));
    assert!(lock.release(&next).await.expect("release"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_extend_by_hand_moves_the_grant_to_a_lease_of_its_own() {
    let cluster = one_member();
    let lock = lock_on(&cluster);
    let ttl = Duration::from_secs(2);
    let locker = Locker::new(lock.clone());
    let mut guard = locker.lock("x").fixed_ttl(ttl).await.expect("free");
    // A neighbour on the same bucket lease, never released.
    let neighbour = granted(lock.try_acquire("y", token(), ttl).await.expect("answers"));
    let bucket = key_of(&lock, "x").await.expect("held").lease();
    let fencing = guard.fencing_token();

    guard
        .extend(Duration::from_secs(8))
        .await
        .expect("extended");
    let moved = key_of(&lock, "x").await.expect("held");
    assert_ne!(moved.lease(), bucket, "moved off the bucket lease");
    // The move left the neighbour where it was, and the bucket lease was not kept alive:
    // the neighbour's key goes at its time while the extended grant's stays.
    let neighbour_kv = key_of(&lock, "y").await.expect("held");
    assert_eq!(neighbour_kv.lease(), bucket);
    gone_at(&lock, neighbour.name()).await;
    assert!(
        key_of(&lock, "x").await.is_some(),
        "the extended grant stays"
    );
    assert!(guard.is_held());

    // Still the same grant to everyone who reads its term.
    let holder = lock
        .describe_holder("x")
        .await
        .expect("answers")
        .expect("held");
    assert_eq!(holder.fencing_token, fencing, "the term is the grant's");
    let put = TxnOp::put("x-data", "written under the lock", None);
    lock.held_commit(&guard, [put])
        .await
        .expect("a held transaction still commits after the move");

    // Extended again (its own lease kept alive), then released at once.
    guard
        .extend(Duration::from_secs(8))
        .await
        .expect("extended");
    assert_eq!(
        key_of(&lock, "x").await.expect("held").lease(),
        moved.lease()
    );
    guard.release().await.expect("ours");
    assert!(key_of(&lock, "x").await.is_none(), "deleted at once");
}
