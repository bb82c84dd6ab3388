//! Holder descriptions ([`Lock::describe_holder`], [`Lock::annotate`]): the checks that the
//! backends describing their holders (`Capabilities::holders`) share in their `holder_notes`
//! tests. Each takes the backend's [`Lock`] (and a [`Locker`] over it where it grants) and
//! panics when a rule breaks; what a backend's layout keeps (its keys, their values, their
//! expiry) its own test file checks, on what these hand back.

use std::time::Duration;

use lock_core::backend::{Holder, Lock};
use lock_core::{Election, Guard, Leader, Leadership, Lease, LockError, Locker};

/// The holder of `name`, as `lock` describes it.
///
/// # Panics
/// When the read fails or nobody holds `name`.
pub async fn holder<L: Lock + ?Sized>(lock: &L, name: &str) -> Holder {
    lock.describe_holder(name)
        .await
        .expect("reads")
        .unwrap_or_else(|| panic!("{name} is held"))
}

/// The holder of `name`, asserted to carry the term `term` and the note `note`.
///
/// # Panics
/// When it does not, the read fails or nobody holds `name`.
pub async fn assert_holder<L: Lock + ?Sized>(
    lock: &L,
    name: &str,
    term: u64,
    note: Option<&[u8]>,
) -> Holder {
    let holder = holder(lock, name).await;
    assert_eq!(holder.fencing_token, term, "the term of {name}'s holder");
    assert_eq!(holder.note.as_deref(), note, "the note of {name}'s holder");
    holder
}

/// Asserts that `lock` describes nobody holding `name`.
///
/// # Panics
/// When it describes a holder, or the read fails.
pub async fn assert_no_holder<L: Lock + ?Sized>(lock: &L, name: &str) {
    assert_eq!(
        lock.describe_holder(name).await.expect("reads"),
        None,
        "nobody holds {name}"
    );
}

/// `lock` declares that it describes holders and describes nobody at `name` yet; `locker` (over
/// the same store) takes `name` for a fixed `ttl`: the description has the grant's fencing
/// token (above 0) as its term, no note and a TTL in `(0, ttl]`. A note through the guard's
/// lease is written, and read back with the same term. Returns the guard, still holding, for
/// the backend's checks of its layout.
///
/// # Panics
/// When any of that breaks.
pub async fn annotate_then_describe<L: Lock + ?Sized>(
    lock: &L,
    locker: &Locker,
    name: &str,
    ttl: Duration,
    note: &[u8],
) -> Guard {
    assert!(
        lock.capabilities().holders,
        "the backend declares that it describes holders"
    );
    assert_no_holder(lock, name).await;
    let guard = locker.lock(name).fixed_ttl(ttl).await.expect("granted");
    assert!(guard.fencing_token() > 0);
    let described = assert_holder(lock, name, guard.fencing_token(), None).await;
    assert!(
        described
            .ttl
            .is_some_and(|t| t > Duration::ZERO && t <= ttl),
        "{described:?}"
    );
    assert!(
        lock.annotate(&guard.lease(), note).await.expect("writes"),
        "our lease: written"
    );
    assert_holder(lock, name, guard.fencing_token(), Some(note)).await;
    guard
}

/// A grant's note is its own. `stale` held `name` before (and wrote a note); `current` holds it
/// now: the description has `current`'s term, larger than `stale`'s, and no note; a note
/// through `stale` is refused and shows nowhere; `note` through `current` is written and shown.
///
/// # Panics
/// When any of that breaks.
pub async fn a_later_grant_starts_without_a_note<L: Lock + ?Sized>(
    lock: &L,
    name: &str,
    stale: &Lease,
    current: &Lease,
    note: &[u8],
) {
    assert!(current.fencing_token() > stale.fencing_token());
    let described = holder(lock, name).await;
    assert_eq!(
        described.fencing_token,
        current.fencing_token(),
        "the new term"
    );
    assert_eq!(
        described.note, None,
        "the earlier grant's note is not the later one's"
    );
    assert!(
        !lock.annotate(stale, b"late").await.expect("answers"),
        "a stale lease writes no note"
    );
    assert_holder(lock, name, current.fencing_token(), None).await;
    assert!(lock.annotate(current, note).await.expect("writes"));
    assert_holder(lock, name, current.fencing_token(), Some(note)).await;
}

/// `name` is held by another client (a key of the backend's layout with a value of its own and
/// a TTL of at most `ttl`): described with no term (0) and no note, the TTL within `ttl`.
///
/// # Panics
/// When any of that breaks.
pub async fn a_foreign_holder_has_no_term<L: Lock + ?Sized>(lock: &L, name: &str, ttl: Duration) {
    let described = assert_holder(lock, name, 0, None).await;
    assert!(described.ttl.is_some_and(|t| t <= ttl), "{described:?}");
}

/// Notes through `lease` (which holds `name`) are bounded: one of `max + 1` bytes is
/// `InvalidInput`, one of `max` is written and read back whole.
///
/// # Panics
/// When any of that breaks.
pub async fn notes_are_bounded<L: Lock + ?Sized>(lock: &L, lease: &Lease, max: usize) {
    let big = vec![b'x'; max + 1];
    let answer = lock.annotate(lease, &big).await;
    assert!(
        matches!(answer, Err(LockError::InvalidInput { .. })),
        "{answer:?}"
    );
    assert!(
        lock.annotate(lease, &big[..max])
            .await
            .expect("the largest note is written")
    );
    assert_holder(lock, lease.name(), lease.fencing_token(), Some(&big[..max])).await;
}

/// `election` (a candidate's) campaigns with the value `value`; `observer`, a locker on another
/// lock of the same store, reads the leader's term and value. Returns both sides.
///
/// # Panics
/// When the campaign or the read fails, or the observer reads another leader.
pub async fn a_leader_is_described(
    election: Election,
    observer: &Locker,
    value: &str,
) -> (Leadership, Leader) {
    let leadership = election.value(value).campaign().await.expect("elected");
    let leader = observer
        .elect(leadership.name())
        .leader()
        .await
        .expect("reads")
        .expect("a leader");
    assert_eq!(leader.term(), leadership.term());
    assert_eq!(leader.value_str(), Some(value));
    (leadership, leader)
}

/// `leadership` resigns: `observer` then reads no leader.
///
/// # Panics
/// When the resignation or the read fails, or the observer still reads a leader.
pub async fn a_resignation_leaves_no_leader(leadership: Leadership, observer: &Locker) {
    let name = leadership.name().to_owned();
    leadership.resign().await.expect("ours");
    assert!(
        observer
            .elect(name)
            .leader()
            .await
            .expect("reads")
            .is_none(),
        "nobody leads after resigning"
    );
}
