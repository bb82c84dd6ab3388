//! The inspector (`Inspect`) beyond the conformance module: the grant time each kind writes in
//! its own transaction (`\0at/…/<token>`, on the grant's lease, gone with its release, replaced
//! by a hand-over's), and releases by a reader's or a semaphore holder's token.

use std::time::{Duration, SystemTime};

use lock_core::Token;
use lock_core::backend::{Attempt, Handover, HeldKind, Inspect, Lock};
use lock_etcd::EtcdLock;
use lock_etcd::etcd_client::GetOptions;

use crate::common::{lock_on, one_member};

const TTL: Duration = Duration::from_secs(10);

/// Every grant-time key under the default prefix.
async fn grant_times(lock: &EtcdLock) -> usize {
    let client = lock.client().await.expect("connects");
    let mut kv = client.kv_client();
    let answer = kv
        .get(
            "distlock/\0at/",
            Some(GetOptions::new().with_prefix().with_count_only()),
        )
        .await
        .expect("get");
    usize::try_from(answer.count()).expect("a count")
}

fn acquired(attempt: Attempt) -> lock_core::Lease {
    match attempt {
        Attempt::Acquired(lease) => lease,
        Attempt::Busy { .. } => panic!("busy"),
    }
}

#[tokio::test]
async fn every_grant_says_since_when_and_its_release_takes_it_along() {
    let cluster = one_member();
    let lock = lock_on(&cluster);
    let before = SystemTime::now() - Duration::from_secs(1);
    let token = || Token::generate().expect("rng");
    let mutex = acquired(lock.try_acquire("m", token(), TTL).await.expect("m"));
    let renewed = acquired(
        lock.try_acquire_renewed("n", token(), TTL)
            .await
            .expect("n"),
    );
    let reader = acquired(
        lock.try_acquire_read("r", false, token(), TTL)
            .await
            .expect("r"),
    );
    let permit = acquired((lock.try_acquire_semaphore("s", 1, 2, token(), TTL).await).expect("s"));
    let writer = acquired(
        lock.try_acquire_write("w", false, token(), TTL)
            .await
            .expect("w"),
    );
    let fair = acquired(
        lock.try_acquire_fair("f", false, token(), TTL)
            .await
            .expect("f"),
    );
    let after = SystemTime::now() + Duration::from_secs(1);
    assert_eq!(grant_times(&lock).await, 6);
    for (name, kind) in [
        ("m", HeldKind::Mutex),
        ("n", HeldKind::Mutex),
        ("r", HeldKind::Read),
        ("s", HeldKind::Semaphore),
        ("w", HeldKind::Write),
        ("f", HeldKind::Mutex),
    ] {
        let held = lock.inspect(name).await.expect("reads");
        assert_eq!(held.len(), 1, "{held:#?}");
        assert_eq!(held[0].kind, kind, "{held:#?}");
        let since = held[0].holders[0].since.expect("since");
        assert!(before <= since && since <= after, "{name}: {since:?}");
    }

    // A hand-over is a new grant: its own time, the old one's gone.
    let Handover::Handed(handed) = lock.hand_over(&mutex, token(), TTL).await.expect("hands")
    else {
        panic!("ours");
    };
    assert_eq!(grant_times(&lock).await, 6);
    let held = lock.inspect("m").await.expect("reads");
    assert!(
        held[0].holders[0]
            .token
            .ends_with(handed.token().to_hex().as_str())
    );
    assert!(held[0].holders[0].since.is_some(), "{held:#?}");

    for lease in [handed, renewed, reader, permit, writer, fair] {
        assert!(lock.release(&lease).await.expect("releases"), "{lease:?}");
    }
    assert_eq!(
        grant_times(&lock).await,
        0,
        "every release took its time along"
    );
}

#[tokio::test]
async fn a_reader_or_a_permit_is_released_by_its_token() {
    let cluster = one_member();
    let lock = lock_on(&cluster);
    let token = || Token::generate().expect("rng");
    let readers = [
        acquired(
            lock.try_acquire_read("r", false, token(), TTL)
                .await
                .expect("r"),
        ),
        acquired(
            lock.try_acquire_read("r", false, token(), TTL)
                .await
                .expect("r"),
        ),
    ];
    let permit = acquired((lock.try_acquire_semaphore("s", 1, 2, token(), TTL).await).expect("s"));
    let held = lock.inspect("r").await.expect("reads");
    assert_eq!(held[0].holder_count, 2);
    let first = held[0].holders[0].token.clone();
    assert!(!lock.release_token("r", "dl:0").await.expect("answers"));
    assert!(lock.release_token("r", &first).await.expect("answers"));
    assert!(
        !lock.release_token("r", &first).await.expect("answers"),
        "gone"
    );
    let held = lock.inspect("r").await.expect("reads");
    assert_eq!(held[0].holder_count, 1, "{held:#?}");

    let held = lock.inspect("s").await.expect("reads");
    let holder = held[0].holders[0].token.clone();
    assert_eq!(held[0].holders[0].permits, Some(1));
    assert!(lock.release_token("s", &holder).await.expect("answers"));
    assert!(lock.inspect("s").await.expect("reads").is_empty());
    assert!(
        !lock.release(&permit).await.expect("answers"),
        "released by token"
    );
    for reader in readers {
        lock.release(&reader).await.expect("answers");
    }
    assert_eq!(grant_times(&lock).await, 0);
}

/// A forced release (`distlock release --force`) deletes the holder's key and leaves its etcd
/// lease alive (a shared lease may carry other grants). A writer's grant sits on an etcd lease
/// of its own, so after another writer took the name the first one's keep-alive still
/// succeeds: only the compare of the lock key's value, beside it in the extend, tells the
/// first writer its lock is gone. This kills the store-protocol mutant
/// `etcd-extend-skips-value-compare` (VERIFICATION.md §4.1).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_forced_out_finds_its_lock_lost_at_its_next_extend() {
    let cluster = one_member();
    let (one, other) = (lock_on(&cluster), lock_on(&cluster));
    let ttl = Duration::from_secs(3);
    let mut first = lock_core::Locker::new(one.clone())
        .write("forced")
        .fixed_ttl(ttl)
        .await
        .expect("free");
    let shown = one.inspect("forced").await.expect("answers");
    let token = shown.first().expect("held").holders[0].token.clone();
    assert!(
        one.release_token("forced", &token).await.expect("answers"),
        "the forced release found the writer"
    );
    let second = lock_core::Locker::new(other)
        .write("forced")
        .fixed_ttl(ttl)
        .await
        .expect("free after the forced release");

    let extended = first.extend(ttl).await;
    assert!(
        extended.is_err() && !first.is_held(),
        "the writer forced out kept a lock another writer holds: {extended:?}"
    );
    second.release().await.expect("the second writer holds");
}
