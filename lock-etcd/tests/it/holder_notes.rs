//! Holder descriptions (`Lock::describe_holder`, `Lock::annotate`): the note beside the grant in
//! `\0note/…/` on the grant's own lease, the term from the lock key's `mod_revision`, and
//! leader election's observers on etcd.

use std::time::Duration;

use futures::StreamExt;
use lock_core::backend::{Attempt, Handover, Lock};
use lock_core::{Kind, Locker, Token};
use lock_etcd::etcd_client::{Client, PutOptions};
use lock_etcd::{EtcdLock, MAX_NOTE_BYTES};
use lock_testkit::holders;

use crate::common::{lock_on, one_member};

const TTL: Duration = Duration::from_secs(10);

/// The note key of `name` under the default prefix (the layout the README documents).
fn note_key(name: &str) -> Vec<u8> {
    format!("distlock/\0note/{}:{name}/", name.len()).into_bytes()
}

/// The value, lease and mod revision of `key`, read with the raw client.
async fn raw(client: &Client, key: &[u8]) -> Option<(Vec<u8>, i64, i64)> {
    let mut kv = client.kv_client();
    let answer = kv.get(key, None).await.expect("get");
    answer
        .kvs()
        .first()
        .map(|kv| (kv.value().to_vec(), kv.lease(), kv.mod_revision()))
}

async fn grant(lock: &EtcdLock, name: &str) -> lock_core::Lease {
    let token = Token::generate().expect("rng");
    match lock.try_acquire(name, token, TTL).await.expect("answers") {
        Attempt::Acquired(lease) => lease,
        Attempt::Busy { .. } => panic!("{name} was busy"),
    }
}

#[tokio::test]
async fn annotate_then_describe() {
    let cluster = one_member();
    let lock = lock_on(&cluster);
    let client = lock.client().await.expect("connects");
    let locker = Locker::new(lock.clone());
    // The term is the grant's fencing token; then the note is written.
    let mut guard = holders::annotate_then_describe(
        &lock,
        &locker,
        "order:42",
        TTL,
        b"pod-a:8080\nsecond line",
    )
    .await;

    // The lock key keeps `dl:` + token; the note key holds that value, a newline and the note,
    // on the same etcd lease as the lock key.
    let (value, lease, _) = raw(&client, &lock.key("order:42")).await.expect("held");
    assert!(value.starts_with(b"dl:") && value.len() == 35, "{value:?}");
    let (note, note_lease, _) = raw(&client, &note_key("order:42"))
        .await
        .expect("the note key");
    let mut expected = value.clone();
    expected.extend_from_slice(b"\npod-a:8080\nsecond line");
    assert_eq!(note, expected);
    assert_eq!(note_lease, lease, "the note lives on the grant's lease");

    // A renewal (a lease keep-alive) changes neither the term nor the note.
    guard.extend(TTL).await.expect("renewed");
    let term = guard.fencing_token();
    holders::assert_holder(&lock, "order:42", term, Some(b"pod-a:8080\nsecond line")).await;

    // A second note replaces the first.
    assert!(
        lock.annotate(&guard.lease(), b"pod-a:9090")
            .await
            .expect("writes")
    );
    holders::assert_holder(&lock, "order:42", term, Some(b"pod-a:9090")).await;

    guard.release().await.expect("released");
    holders::assert_no_holder(&lock, "order:42").await;
    // The release revokes the lease in the background, and the note goes with it.
    let mut gone = false;
    for _ in 0..50 {
        if raw(&client, &note_key("order:42")).await.is_none() {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(gone, "the note key outlived its grant's lease");
}

#[tokio::test]
async fn an_earlier_grants_note_is_never_shown_with_a_later_grant() {
    let cluster = one_member();
    let lock = lock_on(&cluster);
    let client = lock.client().await.expect("connects");
    let first = grant(&lock, "order:42").await;
    assert!(lock.annotate(&first, b"first").await.expect("writes"));
    // What a release does before its lease is revoked in the background: the lock key is
    // deleted, the note (on the first grant's lease) is still there.
    let mut kv = client.kv_client();
    kv.delete(lock.key("order:42"), None).await.expect("delete");
    assert!(raw(&client, &note_key("order:42")).await.is_some());

    let second = grant(&lock, "order:42").await;
    holders::a_later_grant_starts_without_a_note(&lock, "order:42", &first, &second, b"second")
        .await;
    assert!(lock.release(&second).await.expect("answers"));
    lock.release(&first).await.expect("answers");
}

#[tokio::test]
async fn a_hand_over_starts_a_new_term_without_the_old_note() {
    let cluster = one_member();
    let lock = lock_on(&cluster);
    let first = grant(&lock, "order:42").await;
    assert!(lock.annotate(&first, b"pod-a").await.expect("writes"));
    let to = Token::generate().expect("rng");
    let Handover::Handed(second) = lock.hand_over(&first, to, TTL).await.expect("answers") else {
        panic!("hand-over refused");
    };
    // The new term starts without the old holder's note, and only the new holder writes one.
    holders::a_later_grant_starts_without_a_note(&lock, "order:42", &first, &second, b"pod-b")
        .await;
    // A keep-alive of the new grant leaves its term and its note alone.
    assert!(lock.extend(&second, TTL).await.expect("answers").is_some());
    holders::assert_holder(&lock, "order:42", second.fencing_token(), Some(b"pod-b")).await;
    assert!(lock.release(&second).await.expect("answers"));
}

#[tokio::test]
async fn a_foreign_holder_has_no_term() {
    let cluster = one_member();
    let lock = lock_on(&cluster);
    let client = lock.client().await.expect("connects");
    let mut leases = client.lease_client();
    let id = leases.grant(5, None).await.expect("lease").id();
    let mut kv = client.kv_client();
    kv.put(
        lock.key("leased"),
        "another-client",
        Some(PutOptions::new().with_lease(id)),
    )
    .await
    .expect("put");
    kv.put(lock.key("forever"), "another-client", None)
        .await
        .expect("put");
    holders::a_foreign_holder_has_no_term(&lock, "leased", Duration::from_secs(5)).await;
    let holder = holders::holder(&lock, "forever").await;
    assert_eq!(
        (holder.fencing_token, holder.ttl),
        (0, None),
        "no lease: no TTL"
    );
}

#[tokio::test]
async fn bad_input_and_other_kinds() {
    let cluster = one_member();
    let lock = lock_on(&cluster);
    let lease = grant(&lock, "order:42").await;
    holders::notes_are_bounded(&lock, &lease, MAX_NOTE_BYTES).await;
    assert!(lock.release(&lease).await.expect("answers"));

    // A semaphore permit is not the mutex's holder: no note, nobody described.
    let token = Token::generate().expect("rng");
    let kind = Kind::Semaphore { permits: 1, max: 2 };
    let Attempt::Acquired(permit) = lock
        .try_acquire_kind("pool", kind, token, TTL)
        .await
        .expect("answers")
    else {
        panic!("a free semaphore was busy");
    };
    assert!(!lock.annotate(&permit, b"x").await.expect("answers"));
    assert_eq!(lock.describe_holder("pool").await.expect("reads"), None);
    assert!(lock.release(&permit).await.expect("answers"));
}

/// Leader election over etcd: `leader()` tells the term and the value, `observe()` each change
/// in order, while the lock key keeps `dl:` + the leader's token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_election_on_etcd_has_observers() {
    let cluster = one_member();
    let candidate = Locker::new(lock_on(&cluster));
    let lock = lock_on(&cluster);
    let observer = Locker::new(lock.clone());
    let within = Duration::from_secs(10);
    let mut changes = Box::pin(
        observer
            .elect("scheduler")
            .poll_interval(Duration::from_millis(200))
            .observe(),
    );
    let first = tokio::time::timeout(within, changes.next())
        .await
        .expect("the first change in time")
        .expect("the stream goes on")
        .expect("reads");
    assert!(first.is_none(), "nobody leads yet: {first:?}");

    let (leadership, leader) =
        holders::a_leader_is_described(candidate.elect("scheduler").lease(TTL), &observer, "pod-a")
            .await;
    assert!(leader.is_recorded() && leader.since().is_some());
    let client = lock.client().await.expect("connects");
    let (value, _, revision) = raw(&client, &lock.key("scheduler")).await.expect("held");
    assert!(value.starts_with(b"dl:") && value.len() == 35, "{value:?}");
    assert_eq!(
        u64::try_from(revision).ok(),
        Some(leadership.term()),
        "the term is the leader key's revision, as etcd's own election"
    );

    let seen = tokio::time::timeout(within, changes.next())
        .await
        .expect("the leader in time")
        .expect("the stream goes on")
        .expect("reads")
        .expect("a leader");
    assert_eq!(seen.term(), leadership.term());
    assert_eq!(seen.value_str(), Some("pod-a"));

    holders::a_resignation_leaves_no_leader(leadership, &observer).await;
    let after = tokio::time::timeout(within, changes.next())
        .await
        .expect("the resignation in time")
        .expect("the stream goes on")
        .expect("reads");
    assert!(after.is_none(), "nobody leads after resigning: {after:?}");
}
