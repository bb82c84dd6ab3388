//! Operator reads ([`Inspect`], reached through
//! [`Lock::inspector`](lock_core::backend::Lock::inspector)): what `distlock ls`, `show` and
//! `release --token` see on every backend. A held lock of each kind the backend offers is
//! listed with its holder's token, fencing token, kind, note, a true "held since" on the first
//! look, and TTL; a fair lock's waiters are counted; a release with a wrong token changes
//! nothing, and with the right one the next waiter gets the lock; bad names are refused as
//! everywhere else.

use std::time::{Duration, SystemTime};

use lock_core::backend::{
    Fencing as Declared, HeldKind, HeldLock, HolderView, Inspect, ListOptions, NamePattern,
};
use lock_core::{Guard, LockError, Locker};

use super::{Backend, name};

/// The backend's inspector: every backend has one.
fn inspector(locker: &Locker) -> &dyn Inspect {
    locker.backend_lock().inspector().unwrap_or_else(|| {
        panic!(
            "{} gives no inspector (`Lock::inspector`): operator tools cannot read it",
            locker.backend()
        )
    })
}

/// The mutex `name` on `locker` for a fixed `ttl`, waited for within the patience.
async fn take(backend: &Backend, locker: &Locker, name: &str, ttl: Duration) -> Guard {
    backend
        .within(
            "taking the lock",
            locker
                .lock(name)
                .fixed_ttl(ttl)
                .wait(backend.patience)
                .into_future(),
        )
        .await
        .unwrap_or_else(|e| panic!("take {name}: {e}"))
}

/// Whether the backend's locks are the server's session locks (advisory locks: no token of
/// their own, no fencing token), shown as [`HeldKind::Session`].
fn session_locks(backend: &Backend) -> bool {
    backend.capabilities().fencing == Declared::None
}

/// The hold of `name` as `kind` an inspection finds, within the patience.
async fn find(backend: &Backend, locker: &Locker, name: &str, kind: HeldKind) -> HeldLock {
    let holds = backend
        .within(
            &format!("inspecting {name}"),
            inspector(locker).inspect(name),
        )
        .await
        .unwrap_or_else(|e| panic!("inspect {name}: {e}"));
    let wanted = if session_locks(backend) && kind == HeldKind::Mutex {
        [HeldKind::Mutex, HeldKind::Session]
    } else {
        [kind, kind]
    };
    holds
        .iter()
        .find(|h| wanted.contains(&h.kind))
        .cloned()
        .unwrap_or_else(|| panic!("{name} held as {kind} is not found: {holds:#?}"))
}

/// The view of `guard`'s holder among `held`'s holders (its token ends with the guard's,
/// whatever the store puts before it). A session's lock has no token of its own (its holder's
/// token is the server's session id, which the guard cannot know): its one holder is the
/// session.
fn holder_of<'a>(held: &'a HeldLock, guard: &Guard) -> &'a HolderView {
    if held.kind == HeldKind::Session {
        assert_eq!(held.holder_count, 1, "one session holds it: {held:#?}");
        return held
            .first_holder()
            .unwrap_or_else(|| panic!("the session holding {} is not shown", guard.name()));
    }
    let token = guard.lease().token().to_hex();
    held.holders
        .iter()
        .find(|h| h.token.ends_with(token.as_str()))
        .unwrap_or_else(|| panic!("the holder {} is not among {held:#?}", token.as_str()))
}

/// Checks what every holder view says of `guard`, taken between `before` and `after` with
/// `ttl`: a TTL left no longer than the lease, the grant's fencing token where the store keeps
/// one per holder, and a "held since" within the grant's time where it records one.
fn assert_holder(
    view: &HolderView,
    guard: &Guard,
    ttl: Duration,
    window: (SystemTime, SystemTime),
) {
    if let Some(left) = view.ttl {
        assert!(
            left <= ttl + Duration::from_millis(50),
            "{}: {left:?} left of a {ttl:?} lease",
            guard.name()
        );
    }
    if let Some(fencing_token) = view.fencing_token
        && guard.fencing_token() != 0
    {
        assert_eq!(
            fencing_token,
            guard.fencing_token(),
            "{}: the holder's fencing token",
            guard.name()
        );
    }
    if let Some(since) = view.since {
        let slack = Duration::from_secs(2);
        assert!(
            since + slack >= window.0 && since <= window.1 + slack,
            "{}: held since {since:?}, granted between {:?} and {:?}",
            guard.name(),
            window.0,
            window.1
        );
    }
}

/// A mutex taken on one locker is listed by `list` (its name matched by a pattern) and read
/// by `inspect`: its holder's token, the grant's fencing token, a TTL no longer than the
/// lease, a true "held since" on this first look, and the note its holder wrote.
pub async fn mutex_is_listed_with_its_holder(backend: &Backend, prefix: &str) {
    let name = name(prefix, "held");
    let locker = backend.locker();
    let ttl = backend.patience;
    let before = SystemTime::now();
    let guard = take(backend, &locker, &name, ttl).await;
    let after = SystemTime::now();

    let pattern = NamePattern::new(&format!("{prefix}*")).expect("a glob");
    let listing = backend
        .within(
            "listing",
            inspector(&locker).list(&pattern, &ListOptions::default()),
        )
        .await
        .unwrap_or_else(|e| panic!("list {pattern:?}: {e}"));
    let listed = listing
        .locks
        .iter()
        .find(|l| l.name == name)
        .unwrap_or_else(|| panic!("{name} is not listed: {listing:#?}"));
    assert!(
        listing.locks.iter().all(|l| pattern.matches(&l.name)),
        "a name the pattern does not match is listed: {listing:#?}"
    );
    assert_eq!(listed.holder_count, 1, "one holder: {listed:#?}");

    let held = find(backend, &locker, &name, HeldKind::Mutex).await;
    assert_eq!(held.name, name);
    let view = holder_of(&held, &guard);
    assert_holder(view, &guard, ttl, (before, after));
    if matches!(backend.capabilities().fencing, Declared::Strict(_)) {
        // One store numbers the grants: it knows each holder's (a Redlock knows its grant's
        // once the holder's note names it).
        assert_eq!(
            view.fencing_token,
            Some(guard.fencing_token()),
            "the grant's fencing token is shown: {held:#?}"
        );
    }
    if !session_locks(backend) {
        assert!(view.ttl.is_some(), "the TTL left is shown: {held:#?}");
        assert!(
            view.since.is_some(),
            "a library-held lock says since when it is held, on the first look: {held:#?}"
        );
    }

    // The note its holder writes is shown with it.
    let note = b"inspected by the conformance suite".as_slice();
    if backend.capabilities().holders {
        let noted = locker
            .backend_lock()
            .annotate(&guard.lease(), note)
            .await
            .unwrap_or_else(|e| panic!("annotate {name}: {e}"));
        assert!(noted, "the holder's note was not written");
        let held = find(backend, &locker, &name, HeldKind::Mutex).await;
        let view = holder_of(&held, &guard);
        assert_eq!(
            view.note.as_deref(),
            Some(note),
            "the holder's note: {held:#?}"
        );
        if backend.capabilities().fencing != Declared::None {
            assert_eq!(view.fencing_token, Some(guard.fencing_token()), "{held:#?}");
        }
    }
    guard.release().await.expect("ours");
    let after_release = backend
        .within("inspecting", inspector(&locker).inspect(&name))
        .await
        .unwrap_or_else(|e| panic!("inspect {name}: {e}"));
    assert!(
        after_release.is_empty(),
        "a released lock is still shown: {after_release:#?}"
    );
}

/// Each shared kind the backend offers is shown as itself: two readers (kind `read`, both
/// listed), a writer (kind `write`, its fencing token), a semaphore's holders with their
/// permits and the permits in use.
pub async fn every_kind_is_shown_as_itself(backend: &Backend, prefix: &str) {
    let caps = backend.capabilities();
    let locker = backend.locker();
    let ttl = backend.patience;
    if caps.read_write {
        let name = name(prefix, "rw");
        let before = SystemTime::now();
        let mut readers = Vec::new();
        for _ in 0..2 {
            let reader = backend.locker().read(name.as_str()).fixed_ttl(ttl);
            readers.push(
                backend
                    .within("reading", reader.wait(backend.patience).into_future())
                    .await
                    .unwrap_or_else(|e| panic!("read {name}: {e}")),
            );
        }
        let after = SystemTime::now();
        let held = find(backend, &locker, &name, HeldKind::Read).await;
        assert_eq!(held.holder_count, 2, "two readers: {held:#?}");
        for reader in &readers {
            assert_holder(holder_of(&held, reader), reader, ttl, (before, after));
        }
        for reader in readers {
            reader.release().await.expect("ours");
        }
        let before = SystemTime::now();
        let writer = backend
            .within(
                "writing",
                locker
                    .write(name.as_str())
                    .fixed_ttl(ttl)
                    .wait(backend.patience)
                    .into_future(),
            )
            .await
            .unwrap_or_else(|e| panic!("write {name}: {e}"));
        let after = SystemTime::now();
        let held = find(backend, &locker, &name, HeldKind::Write).await;
        let view = holder_of(&held, &writer);
        assert_holder(view, &writer, ttl, (before, after));
        writer.release().await.expect("ours");
    }
    if caps.semaphore {
        let name = name(prefix, "sem");
        let before = SystemTime::now();
        let one = backend
            .within(
                "taking 2 permits",
                locker
                    .semaphore(name.as_str(), 3)
                    .permits(2)
                    .fixed_ttl(ttl)
                    .wait(backend.patience)
                    .into_future(),
            )
            .await
            .unwrap_or_else(|e| panic!("semaphore {name}: {e}"));
        let two = backend
            .within(
                "taking 1 permit",
                backend
                    .locker()
                    .semaphore(name.as_str(), 3)
                    .fixed_ttl(ttl)
                    .wait(backend.patience)
                    .into_future(),
            )
            .await
            .unwrap_or_else(|e| panic!("semaphore {name}: {e}"));
        let after = SystemTime::now();
        let held = find(backend, &locker, &name, HeldKind::Semaphore).await;
        assert_eq!(held.holder_count, 2, "two holders: {held:#?}");
        assert_eq!(held.permits_used, Some(3), "permits in use: {held:#?}");
        assert_eq!(held.max_permits, Some(3), "the semaphore's size: {held:#?}");
        assert_eq!(holder_of(&held, &one).permits, Some(2), "{held:#?}");
        assert_eq!(holder_of(&held, &two).permits, Some(1), "{held:#?}");
        assert_holder(holder_of(&held, &one), &one, ttl, (before, after));
        one.release().await.expect("ours");
        two.release().await.expect("ours");
    }
}

/// A fair lock with a waiter in line shows kind `fair`, its holder, and the waiter queued.
pub async fn fair_waiters_are_counted(backend: &Backend, prefix: &str) {
    if !backend.capabilities().fair {
        return;
    }
    let name = name(prefix, "fair");
    let locker = backend.locker();
    let guard = backend
        .within(
            "taking the fair lock",
            locker
                .fair(name.as_str())
                .fixed_ttl(backend.patience)
                .wait(backend.patience)
                .into_future(),
        )
        .await
        .unwrap_or_else(|e| panic!("fair {name}: {e}"));
    let other = backend.locker();
    let waiting = other
        .fair(name.as_str())
        .fixed_ttl(backend.patience)
        .wait(backend.patience);
    let waiter = tokio::spawn(waiting.into_future());
    // A fair lock shows as fair, its waiter counted, once the waiter is in line: looked for
    // until it is (a loaded machine took longer than `settle` once), within the patience.
    let inspector = inspector(&locker);
    let held = backend
        .within("the fair lock shown with its waiter in line", async {
            loop {
                tokio::time::sleep(backend.settle / 4).await;
                let holds = inspector.inspect(&name).await.unwrap_or_default();
                if let Some(held) = holds
                    .into_iter()
                    .find(|h| h.kind == HeldKind::Fair && h.queued >= 1)
                {
                    return held;
                }
            }
        })
        .await;
    holder_of(&held, &guard);
    guard.release().await.expect("ours");
    let next = backend
        .within("the waiter's turn", waiter)
        .await
        .expect("the waiter's task")
        .unwrap_or_else(|e| panic!("the waiter of {name}: {e}"));
    next.release().await.expect("ours");
}

/// A waiter that describes itself ([`LockRequest::describe_waiter`](lock_core::LockRequest::describe_waiter))
/// is listed by name while it waits: a listing of `NAME:*` finds its record, under the lock
/// (`waiter_record_of`), with its description; once it is granted the record is gone. A
/// backend that keeps no notes refuses the request instead.
pub async fn described_waiters_are_listed(backend: &Backend, prefix: &str) {
    let name = name(prefix, "described");
    let locker = backend.locker();
    let waiter_locker = backend.locker();
    let description: &[u8] = b"{\"host\":\"h\",\"pid\":7,\"note\":\"waiting\"}";
    if !backend.capabilities().holders {
        let refused = waiter_locker
            .lock(name.as_str())
            .describe_waiter(description)
            .try_acquire()
            .await;
        assert!(
            matches!(refused, Err(LockError::Unsupported { .. })),
            "a waiter description on a store without notes: {refused:?}"
        );
        return;
    }
    let guard = take(backend, &locker, &name, backend.patience).await;
    let waiter = tokio::spawn(
        waiter_locker
            .lock(name.as_str())
            .describe_waiter(description)
            .wait(backend.patience)
            .into_future(),
    );
    let pattern = NamePattern::new(&format!("{name}:*")).expect("a pattern");
    let inspector = inspector(&locker);
    let listed = |wanted: bool| {
        let (inspector, pattern, name) = (inspector, &pattern, name.as_str());
        async move {
            loop {
                let listing = inspector.list(pattern, &ListOptions::default()).await;
                let notes: Vec<_> = listing
                    .map(|l| l.locks)
                    .unwrap_or_default()
                    .into_iter()
                    .filter(|h| lock_core::waiter_record_of(&h.name) == Some(name))
                    .filter_map(|h| h.holders.first()?.note.clone())
                    .collect();
                if notes.is_empty() != wanted {
                    return notes;
                }
                tokio::time::sleep(backend.settle / 4).await;
            }
        }
    };
    let notes = backend
        .within("the waiter listed by name", listed(true))
        .await;
    assert_eq!(
        notes.iter().map(|n| &n[..]).collect::<Vec<_>>(),
        [description],
        "the waiter's record of {name}"
    );
    guard.release().await.expect("ours");
    let next = backend
        .within("the waiter's turn", waiter)
        .await
        .expect("the waiter's task")
        .unwrap_or_else(|e| panic!("the waiter of {name}: {e}"));
    backend
        .within("the waiter's record gone once granted", listed(false))
        .await;
    next.release().await.expect("ours");
}

/// A release by a token that does not hold the lock changes nothing; by the holder's token
/// (as the inspection shows it) it frees the lock, and a waiter on another locker gets it.
pub async fn release_by_token_frees_for_the_next(backend: &Backend, prefix: &str) {
    let name = name(prefix, "release");
    let locker = backend.locker();
    let guard = take(backend, &locker, &name, backend.patience * 3).await;
    let held = find(backend, &locker, &name, HeldKind::Mutex).await;
    let token = holder_of(&held, &guard).token.clone();
    if held.kind == HeldKind::Session {
        // The server binds the lock to its session: only ending the session frees it
        // (`distlock release --force`), never a token.
        let freed = inspector(&locker).release_token(&name, &token).await;
        assert!(
            matches!(freed, Ok(false) | Err(LockError::Unsupported { .. })),
            "a session's lock was released by a token: {freed:?}"
        );
        guard.release().await.expect("ours");
        return;
    }
    // The same shape (a store's prefix kept), another token.
    let keep = token.len().saturating_sub(32);
    let wrong = format!("{}{}", &token[..keep], "0".repeat(token.len() - keep));
    let refused = backend
        .within(
            "releasing with a wrong token",
            inspector(&locker).release_token(&name, &wrong),
        )
        .await
        .unwrap_or_else(|e| panic!("release {name} with a wrong token: {e}"));
    assert!(!refused, "a wrong token released {name}");
    let still = find(backend, &locker, &name, HeldKind::Mutex).await;
    holder_of(&still, &guard);

    let other = backend.locker();
    let waiting = other.lock(name.as_str()).wait(backend.patience * 2);
    let waiter = tokio::spawn(waiting.into_future());
    tokio::time::sleep(backend.settle).await;
    let released = backend
        .within(
            "releasing by token",
            inspector(&locker).release_token(&name, &token),
        )
        .await
        .unwrap_or_else(|e| panic!("release {name} by token: {e}"));
    assert!(released, "the holder's token did not release {name}");
    let next = backend
        .within("the waiter's grant", waiter)
        .await
        .expect("the waiter's task")
        .unwrap_or_else(|e| panic!("the waiter of {name} after a release by token: {e}"));
    next.release().await.expect("ours");
    drop(guard);
}

/// An empty or over-long name is refused by `inspect` and `release_token` with
/// [`LockError::InvalidInput`], as by every other operation.
pub async fn bad_names_are_refused(backend: &Backend, _prefix: &str) {
    let locker = backend.locker();
    let long = "n".repeat(lock_core::MAX_NAME_LEN + 1);
    for bad in ["", long.as_str()] {
        let read = inspector(&locker).inspect(bad).await;
        assert!(
            matches!(read, Err(LockError::InvalidInput { .. })),
            "inspect of a {}-byte name: {read:?}",
            bad.len()
        );
        let released = inspector(&locker).release_token(bad, "00").await;
        assert!(
            matches!(released, Err(LockError::InvalidInput { .. })),
            "release of a {}-byte name: {released:?}",
            bad.len()
        );
    }
}
