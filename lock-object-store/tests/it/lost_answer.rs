//! Issue 46: a grant the store applied whose answer never reached its caller (the caller was
//! cancelled after the write left, or the lock's request bound ran out after the store applied
//! it) leaves nothing held once the background release has run. On `object_store`'s in-memory
//! store behind a [`SlowStore`] that applies the lock object's writes at once and answers them
//! later.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use lock_core::{LockError, Locker, TimeoutPhase};
use lock_object_store::ObjectStoreLock;
use lock_object_store::object_store::memory::InMemory;

use crate::common::SlowStore;

/// How late a lock object's write is answered: far past the callers' bounds below.
const LATE: Duration = Duration::from_millis(200);
/// The callers' bound: the write has landed by then, its answer not.
const BOUND: Duration = Duration::from_millis(50);

/// A lock whose requests are bounded by `bound` on a fresh in-memory store whose writes of
/// `locks/job` are answered [`LATE`], the store, and another lock on it with a generous bound
/// (another process, and what an operator reads with).
fn locks(bound: Duration) -> (ObjectStoreLock, Arc<SlowStore>, ObjectStoreLock) {
    let store = Arc::new(SlowStore::late_write_answers(
        Arc::new(InMemory::new()),
        "locks/job",
        LATE,
    ));
    let lock = ObjectStoreLock::new(store.clone(), "locks", bound);
    let operator = ObjectStoreLock::new(store.clone(), "locks", Duration::from_secs(5));
    (lock, store, operator)
}

/// After the background release had time to run: the object exists (the grant landed), its
/// epoch says one grant was made, and nobody holds it.
async fn assert_given_back(operator: &ObjectStoreLock, store: &SlowStore) {
    tokio::time::sleep(LATE * 5).await;
    assert!(
        store.applied.load(Ordering::SeqCst) >= 1,
        "the grant's write never reached the store: the check checked nothing"
    );
    let object = operator
        .object("job")
        .await
        .expect("readable")
        .expect("the grant's write landed");
    assert_eq!(object.epoch, 1, "one grant was made: {object:?}");
    assert_eq!(
        object.holder, None,
        "a grant whose answer was lost is still held: {object:?}"
    );
    let again = Locker::new(operator.clone())
        .lock("job")
        .try_acquire()
        .await
        .expect("answers");
    let again = again.expect("the name is free for another process at once");
    assert_eq!(again.fencing_token(), 2, "the next grant's epoch");
    again.release().await.expect("ours");
}

/// (a) The caller gives up waiting after the write left, before its answer came.
#[tokio::test(start_paused = true)]
async fn cancelled_after_the_write_landed_leaves_nothing_held() {
    let (lock, store, operator) = locks(Duration::from_secs(5));
    let locker = Locker::new(lock);
    let acquire = locker
        .lock("job")
        .fixed_ttl(Duration::from_secs(10))
        .wait(Duration::from_secs(1));
    let cancelled = tokio::time::timeout(BOUND, acquire.into_future()).await;
    assert!(cancelled.is_err(), "the answer came before the caller left");
    assert_given_back(&operator, &store).await;
}

/// (b) The lock's own request bound runs out after the store applied the write: the caller
/// sees a command timeout, and the grant is released behind it.
#[tokio::test(start_paused = true)]
async fn timed_out_after_the_write_landed_leaves_nothing_held() {
    let (lock, store, operator) = locks(BOUND);
    // The self-probe first, with answers on time: its objects are not lock objects.
    lock.check_store()
        .await
        .expect("the in-memory store writes conditionally");
    let locker = Locker::new(lock);
    let answer = locker
        .lock("job")
        .fixed_ttl(Duration::from_secs(10))
        .try_acquire()
        .await;
    assert!(
        matches!(
            answer,
            Err(LockError::Timeout {
                phase: TimeoutPhase::Command,
                ..
            })
        ),
        "the request bound ran out: {answer:?}"
    );
    assert_given_back(&operator, &store).await;
}

/// The release the `Locker` arms for an unanswered attempt knows the token and not the epoch
/// (fencing token 0): it frees the grant even from a lock that never saw the answer (no cached
/// version: the read decides), while a release naming another epoch is refused.
#[tokio::test(start_paused = true)]
async fn a_release_knowing_only_the_token_frees_the_grant() {
    use lock_core::backend::{Attempt, Lock as _};
    use lock_core::{Lease, Token};
    use tokio::time::Instant;

    let (lock, _store, operator) = locks(Duration::from_secs(5));
    let token = Token::generate().expect("token");
    let granted = lock
        .try_acquire("job", token, Duration::from_secs(10))
        .await
        .expect("answers");
    assert!(matches!(granted, Attempt::Acquired(_)), "{granted:?}");
    let stale = Lease::new("job", token, 7, Instant::now());
    assert!(
        !operator.release(&stale).await.expect("answers"),
        "a release naming another epoch freed the grant"
    );
    let armed = Lease::new("job", token, 0, Instant::now());
    assert!(
        operator.release(&armed).await.expect("answers"),
        "the armed release of an unanswered grant did not free it"
    );
    let object = operator.object("job").await.expect("readable");
    assert_eq!(object.and_then(|o| o.holder), None, "still held");
}
