//! The exclusive lock ([`Locker::lock`](lock_core::Locker::lock)) and, where the rule is the
//! backend's own, the [`Lock`] operations under it: exclusion, expiry, not-ours answers to a
//! stale release or extend, fencing tokens, hand-over, wake-ups, cancellation, renewal and
//! loss, bad input.
//!
//! Each locker from [`Backend::locker`] stands for a process of its own (its own connections,
//! waiting lines and renewal task); exclusion among OS processes proper is checked per backend
//! with [`crate::exclusion::processes_exclude_each_other`] (lock-redis's and lock-redlock's
//! `tests/it/exclusion.rs`).
//! Where backends differ, the checks consult [`Backend::announces_releases`] and
//! [`Backend::fencing`] and assert the weaker property those promise.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use lock_core::backend::{Attempt, Handover, Lock, MultiAttempt, ReleaseWatch};
use lock_core::{Backoff, Guard, Kind, Lease, LockError, LockerBuilder, MAX_NAME_LEN, Token};
use tokio::time::Instant;

use super::{Backend, Fencing, name, poll_then_drop};

pub use super::lost_answer::lost_answer_leaves_nothing;

/// Holds a grant as long as [`Backend::fencing`] needs before it is ended, so the next
/// grant's token can be compared with it.
async fn hold_for_fencing(backend: &Backend) {
    if let Fencing::AfterHolding(hold) = backend.fencing() {
        tokio::time::sleep(hold).await;
    }
}

/// Asserts what [`Backend::fencing`] promises of `tokens`, the tokens of successive grants of
/// one name (each held as [`hold_for_fencing`] says) in grant order; `path` says how they
/// followed each other.
fn assert_fencing(backend: &Backend, tokens: &[u64], path: &str) {
    if backend.fencing() == Fencing::None {
        assert!(
            tokens.iter().all(|&token| token == 0),
            "a backend without fencing tokens issued some ({path}): {tokens:?}"
        );
        return;
    }
    assert!(
        tokens.iter().all(|&token| token > 0),
        "every grant carries a fencing token ({path}): {tokens:?}"
    );
    match backend.fencing() {
        Fencing::Strict | Fencing::AfterHolding(_) => assert!(
            tokens.windows(2).all(|pair| pair[0] < pair[1]),
            "fencing tokens must strictly increase across {path}: {tokens:?}"
        ),
        // The documented caveat: nothing more to assert (see `Fencing::Unordered`).
        Fencing::Unordered | Fencing::None => {}
    }
}

/// Whether another locker's single try of `name` is refused (the name is held); a try that
/// gets in is released at once.
async fn held_elsewhere(backend: &Backend, name: &str) -> bool {
    match backend
        .locker()
        .lock(name)
        .try_acquire()
        .await
        .unwrap_or_else(|e| panic!("try {name}: {e}"))
    {
        Some(guard) => {
            guard
                .release()
                .await
                .unwrap_or_else(|e| panic!("release {name}: {e}"));
            false
        }
        None => true,
    }
}

/// Takes `name` on another locker, waiting at most the patience.
async fn take(backend: &Backend, name: &str) -> Guard {
    let request = backend.locker().lock(name).wait(backend.patience);
    backend
        .within(&format!("taking {name}"), request.into_future())
        .await
        .unwrap_or_else(|e| panic!("take {name}: {e}"))
}

/// Six tasks on three lockers take one name four times each: inside the lock a counter never
/// sees a second holder, and a read-pause-write increment loses no update.
pub async fn exclusion_among_tasks(backend: &Backend, prefix: &str) {
    const TASKS: u32 = 6;
    const ROUNDS: u32 = 4;
    let name: Arc<str> = name(prefix, "exclusion").into();
    let inside = Arc::new(AtomicU32::new(0));
    let overlaps = Arc::new(AtomicU32::new(0));
    let counter = Arc::new(AtomicU32::new(0));
    let lockers: Vec<_> = (0..3).map(|_| backend.locker()).collect();
    let tasks: Vec<_> = (0..TASKS)
        .map(|task| {
            let locker = lockers[task as usize % lockers.len()].clone();
            let (name, inside, overlaps, counter) = (
                Arc::clone(&name),
                Arc::clone(&inside),
                Arc::clone(&overlaps),
                Arc::clone(&counter),
            );
            let (patience, hold) = (backend.patience, backend.settle / 20);
            tokio::spawn(async move {
                for _ in 0..ROUNDS {
                    let guard = locker
                        .lock(Arc::clone(&name))
                        .wait(patience)
                        .await
                        .expect("granted within the patience");
                    if inside.fetch_add(1, Ordering::SeqCst) != 0 {
                        overlaps.fetch_add(1, Ordering::SeqCst);
                    }
                    let seen = counter.load(Ordering::SeqCst);
                    tokio::time::sleep(hold).await;
                    counter.store(seen + 1, Ordering::SeqCst);
                    inside.fetch_sub(1, Ordering::SeqCst);
                    guard.release().await.expect("ours");
                }
            })
        })
        .collect();
    for task in tasks {
        backend
            .within("a task's rounds", task)
            .await
            .expect("no panic");
    }
    assert_eq!(
        overlaps.load(Ordering::SeqCst),
        0,
        "two holders of one name at once"
    );
    assert_eq!(
        counter.load(Ordering::SeqCst),
        TASKS * ROUNDS,
        "an increment under the lock was lost"
    );
}

/// A fixed short TTL frees the name by itself: while it runs, other lockers are refused (the
/// backend's own busy answer gives a holder TTL no longer than the lease's), and once it ran
/// out a waiter gets in, never before the TTL.
pub async fn expiry_frees_the_name(backend: &Backend, prefix: &str) {
    let name = name(prefix, "expiry");
    let started = Instant::now();
    let first = backend
        .locker()
        .lock(name.as_str())
        .fixed_ttl(backend.short_ttl)
        .await
        .expect("free");
    // A refusal is owed only to a try answered while the lease surely ran (`started` is
    // before its grant, so an answer within the TTL of it came while the lease ran). On a
    // loaded machine a try (a new connection to a cluster, say) can be answered after the
    // lease ran out, and then a grant is right: whether the try is late is known only once it
    // is answered.
    let other = backend.locker();
    let try_other = other.lock(name.as_str()).try_acquire().await;
    let late = started.elapsed() >= backend.short_ttl;
    if let Some(guard) = try_other.unwrap_or_else(|e| panic!("try {name}: {e}")) {
        assert!(
            late,
            "another locker got a held name {:?} after a {:?} lease was taken",
            started.elapsed(),
            backend.short_ttl
        );
        guard.release().await.expect("ours");
    }
    let lock = Arc::clone(backend.locker().backend_lock());
    let token = Token::generate().expect("rng");
    let attempt = lock
        .as_ref()
        .try_acquire(&name, token, backend.patience)
        .await
        .expect("answers");
    let late = started.elapsed() >= backend.short_ttl;
    match attempt {
        Attempt::Busy { holder_ttl, .. } => assert!(
            holder_ttl.is_none_or(|ttl| ttl <= backend.short_ttl),
            "the busy answer's holder TTL {holder_ttl:?} exceeds the lease's {:?}",
            backend.short_ttl
        ),
        Attempt::Acquired(lease) if late => {
            lock.as_ref().release(&lease).await.expect("answers");
        }
        Attempt::Acquired(lease) => panic!("the backend granted a held name: {lease:?}"),
    }
    let second = take(backend, &name).await;
    assert!(
        started.elapsed() >= backend.short_ttl * 9 / 10,
        "granted {:?} after a {:?} lease was taken: before its TTL ran out",
        started.elapsed(),
        backend.short_ttl
    );
    assert!(!first.is_held(), "the expired guard still claims the lock");
    second.release().await.expect("ours");
    assert!(
        matches!(first.release().await, Err(LockError::NotOwned { .. })),
        "the expired guard's release must answer not-ours"
    );
}

/// A lease that expired and was taken by another holder: the backend's release answers
/// not-ours (`false`), the guard's [`LockError::NotOwned`], and the new holder keeps the lock.
pub async fn stale_release_is_not_ours(backend: &Backend, prefix: &str) {
    let name = name(prefix, "stale-release");
    let locker = backend.locker();
    let stale = locker
        .lock(name.as_str())
        .fixed_ttl(backend.short_ttl)
        .await
        .expect("free");
    let lease = stale.lease();
    backend.within("the stale lease's end", stale.lost()).await;
    let new = take(backend, &name).await;
    let released = locker.backend_lock().as_ref().release(&lease).await;
    assert!(
        matches!(released, Ok(false)),
        "the backend's release of a stale lease must answer not-ours: {released:?}"
    );
    let released = stale.release().await;
    assert!(
        matches!(released, Err(LockError::NotOwned { .. })),
        "a stale guard's release must be NotOwned: {released:?}"
    );
    new_holder_intact(backend, &name, new, "release").await;
}

/// After a stale guard's `what` (release, extend) answered not-ours: the new holder of `name`
/// still holds it, and its own release finds its lease intact.
async fn new_holder_intact(backend: &Backend, name: &str, new: Guard, what: &str) {
    assert!(new.is_held(), "the new holder lost its guard");
    assert!(
        held_elsewhere(backend, name).await,
        "a stale {what} freed the new holder's lock"
    );
    new.release()
        .await
        .expect("the new holder's lease was left intact");
}

/// A lease that expired and was taken by another holder: the backend's extend answers
/// not-ours (`None`), the guard's [`LockError::NotOwned`], and the new holder keeps the lock
/// with its own expiry.
pub async fn stale_extend_is_not_ours(backend: &Backend, prefix: &str) {
    let name = name(prefix, "stale-extend");
    let locker = backend.locker();
    let mut stale = locker
        .lock(name.as_str())
        .fixed_ttl(backend.short_ttl)
        .await
        .expect("free");
    let lease = stale.lease();
    backend.within("the stale lease's end", stale.lost()).await;
    let new = backend
        .locker()
        .lock(name.as_str())
        .fixed_ttl(backend.patience)
        .wait(backend.patience)
        .await
        .expect("free after the TTL");
    let extended = locker
        .backend_lock()
        .as_ref()
        .extend(&lease, backend.patience)
        .await;
    assert!(
        matches!(extended, Ok(None)),
        "the backend's extend of a stale lease must answer not-ours: {extended:?}"
    );
    let extended = stale.extend(backend.patience).await;
    assert!(
        matches!(extended, Err(LockError::NotOwned { .. })),
        "a stale guard's extend must be NotOwned: {extended:?}"
    );
    new_holder_intact(backend, &name, new, "extend").await;
}

/// Successive grants of one name, through a release, an expiry, another release, a single try
/// and the backend's own acquire, carry fencing tokens as [`Backend::fencing`] promises
/// (strictly increasing for a single store).
pub async fn fencing_increases(backend: &Backend, prefix: &str) {
    let name = name(prefix, "fencing");
    let mut tokens = Vec::new();
    let first = take(backend, &name).await;
    tokens.push(first.fencing_token());
    hold_for_fencing(backend).await;
    first.release().await.expect("ours");
    let expiring = backend
        .locker()
        .lock(name.as_str())
        .fixed_ttl(backend.short_ttl)
        .wait(backend.patience)
        .await
        .expect("free");
    tokens.push(expiring.fencing_token());
    backend.within("the lease's expiry", expiring.lost()).await;
    let after_expiry = take(backend, &name).await;
    tokens.push(after_expiry.fencing_token());
    hold_for_fencing(backend).await;
    after_expiry.release().await.expect("ours");
    let tried = backend
        .locker()
        .lock(name.as_str())
        .try_acquire()
        .await
        .expect("answers")
        .expect("free after the release");
    tokens.push(tried.fencing_token());
    hold_for_fencing(backend).await;
    tried.release().await.expect("ours");
    let lock = Arc::clone(backend.locker().backend_lock());
    let token = Token::generate().expect("rng");
    let lease = match lock
        .as_ref()
        .try_acquire(&name, token, backend.patience)
        .await
        .expect("answers")
    {
        Attempt::Acquired(lease) => lease,
        busy => panic!("the backend refused a free name: {busy:?}"),
    };
    tokens.push(lease.fencing_token());
    assert!(
        lock.as_ref().release(&lease).await.expect("answers"),
        "the backend's release of its own lease answers ours"
    );
    assert_fencing(
        backend,
        &tokens,
        "release, expiry, release, a single try, the backend's acquire",
    );
}

/// Hand-over within one locker: a task of the same locker waiting for the name gets it when
/// the holder releases, before another locker can slip in, with a greater fencing token (as
/// [`Backend::fencing`] promises). Under it, the backend's [`Lock::hand_over`] either passes
/// the lock on in one step (a new lease with a greater token, the old one no longer ours) or
/// says it cannot and changes nothing.
pub async fn hand_over_within_one_locker(backend: &Backend, prefix: &str) {
    let name = name(prefix, "hand-over");
    let locker = backend.locker();
    let first = locker.lock(name.as_str()).await.expect("free");
    let waiter = {
        let (locker, name, patience) = (locker.clone(), name.clone(), backend.patience);
        tokio::spawn(async move { locker.lock(name.as_str()).wait(patience).await })
    };
    tokio::time::sleep(backend.settle).await; // the waiter queues in the locker
    assert!(!waiter.is_finished(), "the local waiter got a held name");
    hold_for_fencing(backend).await;
    let first_token = first.fencing_token();
    first.release().await.expect("ours");
    let second = backend
        .within("the local waiter", waiter)
        .await
        .expect("no panic")
        .expect("the local waiter gets the lock");
    assert!(second.is_held());
    assert!(
        held_elsewhere(backend, &name).await,
        "another locker got the name handed to the local waiter"
    );
    assert_fencing(
        backend,
        &[first_token, second.fencing_token()],
        "a hand-over to a local waiter",
    );
    second.release().await.expect("ours");

    let lock = Arc::clone(locker.backend_lock());
    let ttl = backend.patience;
    let lease = match lock
        .as_ref()
        .try_acquire(&name, Token::generate().expect("rng"), ttl)
        .await
        .expect("answers")
    {
        Attempt::Acquired(lease) => lease,
        busy => panic!("the backend refused a free name: {busy:?}"),
    };
    hold_for_fencing(backend).await;
    let to = Token::generate().expect("rng");
    match lock
        .as_ref()
        .hand_over(&lease, to, ttl)
        .await
        .expect("answers")
    {
        Handover::Handed(new) => {
            assert_eq!(new.token(), &to, "handed to the token asked");
            assert_fencing(
                backend,
                &[lease.fencing_token(), new.fencing_token()],
                "the backend's hand-over",
            );
            assert!(
                !lock.as_ref().release(&lease).await.expect("answers"),
                "the handed-over lease is no longer ours"
            );
            let again = lock
                .as_ref()
                .hand_over(&lease, Token::generate().expect("rng"), ttl)
                .await
                .expect("answers");
            assert_eq!(
                again,
                Handover::NotOwned,
                "a stale lease cannot be handed over"
            );
            assert!(
                lock.as_ref().release(&new).await.expect("answers"),
                "the new lease holds the lock"
            );
        }
        Handover::Unsupported => assert!(
            lock.as_ref().release(&lease).await.expect("answers"),
            "an unsupported hand-over changed the lock"
        ),
        other => panic!("a held lease's hand-over answered {other:?}"),
    }
}

/// A waiter on another locker, polling with a full-jitter backoff of 600 patiences, is granted
/// within the patience of a release: only the backend's release announcement explains it (a
/// lucky poll would, about once in 600 runs, which is why the backoff is so slow). A backend
/// whose [`Backend::announces_releases`] is `false` must still let a waiter polling with the
/// default backoff in within the patience.
pub async fn wakeups_across_lockers(backend: &Backend, prefix: &str) {
    let name = name(prefix, "wake-up");
    let slow = backend.patience * 600;
    // Renewed: the holder's TTL, which also caps a waiter's sleep, stays near `slow`.
    let holder = backend
        .locker()
        .lock(name.as_str())
        .lease(slow)
        .await
        .expect("free");
    let side = if backend.announces_releases() {
        LockerBuilder::from_arc(Arc::clone(backend.locker().backend_lock()))
            .backoff(Backoff::new(slow, slow))
            .build()
    } else {
        backend.locker()
    };
    let waiter = {
        let name = name.clone();
        tokio::spawn(async move { side.lock(name.as_str()).wait(slow * 2).await })
    };
    tokio::time::sleep(backend.settle).await; // its first try was busy: it sleeps
    assert!(!waiter.is_finished(), "the waiter got a held name");
    holder.release().await.expect("ours");
    let what = if backend.announces_releases() {
        format!(
            "the waiter on another locker (polling every {slow:?}): a release announcement must wake it"
        )
    } else {
        "the waiter on another locker, polling with the default backoff".to_owned()
    };
    let granted = backend
        .within(&what, waiter)
        .await
        .expect("no panic")
        .expect("granted after the release");
    granted.release().await.expect("ours");
}

/// A request dropped while it waits leaves nothing: once the holder releases, its own locker's
/// single tries get in within the settle period (no local waiting line left, and an attempt
/// the drop left running gives back what it got) as does another's. A request
/// dropped on a free name right after it was sent leaves the name free too.
pub async fn cancelled_acquire_leaves_nothing(backend: &Backend, prefix: &str) {
    let name = name(prefix, "cancelled");
    let holder = backend.locker().lock(name.as_str()).await.expect("free");
    let locker = backend.locker();
    let waiting = locker
        .lock(name.as_str())
        .wait(backend.patience)
        .into_future();
    let done = poll_then_drop(waiting, 4, backend.settle / 4).await;
    assert!(!done, "the waiting request got a held name");
    holder.release().await.expect("ours");
    // The dropped request's last attempt may still be running in the background (a backend
    // that finishes a cancelled attempt and gives back what it granted, as lock-mysql does
    // when the attempt waited for a pooled connection): the name is free again within the
    // settle period, not necessarily at the first try.
    let deadline = Instant::now() + backend.settle;
    let again = loop {
        let again = locker
            .lock(name.as_str())
            .try_acquire()
            .await
            .expect("answers");
        if again.is_some() || Instant::now() >= deadline {
            break again;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let again = again.expect("a dropped waiter left its locker's waiting line or the lock behind");
    again.release().await.expect("ours");

    let free = name.clone() + ":in-flight";
    let in_flight = backend.locker().lock(free.as_str()).into_future();
    let _ = poll_then_drop(in_flight, 1, Duration::ZERO).await;
    tokio::time::sleep(backend.settle).await; // a background release, if any, lands
    assert!(
        !held_elsewhere(backend, &free).await,
        "a request dropped in flight left the name held"
    );
}

/// A renewed lease of one short TTL outlives four of them while its guard lives: still held,
/// other lockers refused, released as ours.
pub async fn renewal_outlives_the_lease(backend: &Backend, prefix: &str) {
    let name = name(prefix, "renewal");
    let guard = backend
        .locker()
        .lock(name.as_str())
        .lease(backend.short_ttl)
        .await
        .expect("free");
    assert!(guard.is_renewing(), "a leased guard is renewed");
    tokio::time::sleep(backend.short_ttl * 4).await;
    assert!(guard.is_held(), "a renewed lease ran out");
    assert!(
        held_elsewhere(backend, &name).await,
        "another locker got a renewed lock after its first lease length"
    );
    guard.release().await.expect("still ours after renewals");
}

/// A fixed-TTL guard is not renewed: its [`Guard::lost`] fires, it no longer claims the lock,
/// the name is free for others, and its release answers not-ours.
pub async fn fixed_ttl_is_lost(backend: &Backend, prefix: &str) {
    let name = name(prefix, "fixed-lost");
    let guard = backend
        .locker()
        .lock(name.as_str())
        .fixed_ttl(backend.short_ttl)
        .await
        .expect("free");
    assert!(!guard.is_renewing(), "a fixed TTL is not renewed");
    backend
        .within("a fixed TTL's lost signal", guard.lost())
        .await;
    assert!(!guard.is_held(), "a lost guard still claims the lock");
    let other = take(backend, &name).await;
    other.release().await.expect("ours");
    assert!(
        matches!(guard.release().await, Err(LockError::NotOwned { .. })),
        "a lost guard's release answers not-ours"
    );
}

/// A renewed lease taken from under its guard (the backend's release of the guard's lease, as
/// an operator or an expiry during a pause would) is noticed by renewal: [`Guard::lost`]
/// fires and the guard no longer claims the lock.
pub async fn renewal_notices_loss(backend: &Backend, prefix: &str) {
    let name = name(prefix, "renewed-lost");
    let locker = backend.locker();
    let guard = locker
        .lock(name.as_str())
        .lease(backend.short_ttl)
        .await
        .expect("free");
    let removed = locker.backend_lock().as_ref().release(&guard.lease()).await;
    assert!(matches!(removed, Ok(true)), "{removed:?}");
    backend
        .within("the renewed guard's lost signal", guard.lost())
        .await;
    assert!(!guard.is_held(), "a lost guard still claims the lock");
}

/// Bad input is refused with [`LockError::InvalidInput`] before anything reaches the backend
/// (a counting wrapper sees no call): an empty or oversized name, a zero fixed TTL or lease,
/// a zero extend. The name asked with a zero TTL stays free.
pub async fn bad_input_sends_nothing(backend: &Backend, prefix: &str) {
    let name = name(prefix, "bad-input");
    let counting = Arc::new(Counting {
        inner: Arc::clone(backend.locker().backend_lock()),
        calls: AtomicU32::new(0),
    });
    let locker = LockerBuilder::from_arc(Arc::clone(&counting) as Arc<dyn Lock>).build();
    let long = "n".repeat(MAX_NAME_LEN + 1);
    let answers = [
        (
            "an empty name, tried",
            locker.lock("").try_acquire().await.map(drop),
        ),
        (
            "an empty name, awaited",
            locker.lock("").wait(backend.settle).await.map(drop),
        ),
        (
            "an oversized name",
            locker.lock(long.as_str()).try_acquire().await.map(drop),
        ),
        (
            "a zero fixed TTL",
            locker
                .lock(name.as_str())
                .fixed_ttl(Duration::ZERO)
                .try_acquire()
                .await
                .map(drop),
        ),
        (
            "a zero lease",
            locker
                .lock(name.as_str())
                .lease(Duration::ZERO)
                .await
                .map(drop),
        ),
    ];
    for (what, answer) in answers {
        assert!(
            matches!(answer, Err(LockError::InvalidInput { .. })),
            "{what}: {answer:?}"
        );
    }
    assert_eq!(
        counting.calls.load(Ordering::SeqCst),
        0,
        "bad input reached the backend"
    );
    let mut guard = locker
        .lock(name.as_str())
        .fixed_ttl(backend.patience)
        .await
        .expect("the name asked with a zero TTL is free");
    let sent = counting.calls.load(Ordering::SeqCst);
    let extended = guard.extend(Duration::ZERO).await;
    assert!(
        matches!(extended, Err(LockError::InvalidInput { .. })),
        "a zero extend: {extended:?}"
    );
    assert_eq!(
        counting.calls.load(Ordering::SeqCst),
        sent,
        "a zero extend reached the backend"
    );
    assert!(guard.is_held(), "a refused extend changed the guard");
    guard.release().await.expect("ours");
}

/// A backend that counts every call it forwards to `inner`.
struct Counting {
    inner: Arc<dyn Lock>,
    calls: AtomicU32,
}

impl Counting {
    fn count(&self) -> &dyn Lock {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.inner.as_ref()
    }
}

#[async_trait]
impl Lock for Counting {
    fn backend(&self) -> &'static str {
        self.inner.backend()
    }
    async fn try_acquire(
        &self,
        name: &str,
        token: Token,
        ttl: Duration,
    ) -> Result<Attempt, LockError> {
        self.count().try_acquire(name, token, ttl).await
    }
    async fn try_acquire_renewed(
        &self,
        name: &str,
        token: Token,
        ttl: Duration,
    ) -> Result<Attempt, LockError> {
        self.count().try_acquire_renewed(name, token, ttl).await
    }
    async fn try_acquire_kind(
        &self,
        name: &str,
        kind: Kind,
        token: Token,
        ttl: Duration,
    ) -> Result<Attempt, LockError> {
        self.count().try_acquire_kind(name, kind, token, ttl).await
    }
    async fn permits_in_use(&self, name: &str) -> Result<u32, LockError> {
        self.count().permits_in_use(name).await
    }
    async fn try_acquire_all(
        &self,
        names: &[Arc<str>],
        token: Token,
        ttl: Duration,
    ) -> Result<MultiAttempt, LockError> {
        self.count().try_acquire_all(names, token, ttl).await
    }
    async fn extend(&self, lease: &Lease, ttl: Duration) -> Result<Option<Instant>, LockError> {
        self.count().extend(lease, ttl).await
    }
    async fn release(&self, lease: &Lease) -> Result<bool, LockError> {
        self.count().release(lease).await
    }
    async fn hand_over(
        &self,
        lease: &Lease,
        to: Token,
        ttl: Duration,
    ) -> Result<Handover, LockError> {
        self.count().hand_over(lease, to, ttl).await
    }
    async fn extend_many(
        &self,
        leases: &[(Lease, Duration)],
    ) -> Vec<Result<Option<Instant>, LockError>> {
        self.count().extend_many(leases).await
    }
    async fn watch(&self, name: &str) -> Result<Option<ReleaseWatch>, LockError> {
        self.count().watch(name).await
    }
    async fn watch_turn(
        &self,
        name: &str,
        token: &Token,
    ) -> Result<Option<ReleaseWatch>, LockError> {
        self.count().watch_turn(name, token).await
    }
    async fn ping(&self) -> Result<(), LockError> {
        self.count().ping().await
    }
}
