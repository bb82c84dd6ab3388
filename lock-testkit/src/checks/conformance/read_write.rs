//! The read-write lock ([`Locker::read`], [`Locker::write`]): shared readers, an exclusive
//! writer, writer preference, one lease per reader, fencing, reentrancy, cancellation.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use lock_core::{Guard, Kind, LockError, Locker};
use tokio::sync::{Notify, mpsc, watch};

use super::queued::QueueWatched;
use super::{Backend, name, poll_then_drop};

/// Takes a read share of `name` on a fresh locker, waiting at most the patience.
async fn read(backend: &Backend, name: &str) -> Guard {
    backend
        .locker()
        .read(name)
        .wait(backend.patience)
        .await
        .unwrap_or_else(|e| panic!("read {name}: {e}"))
}

/// Takes the write lock of `name` on a fresh locker, waiting at most the patience.
async fn write(backend: &Backend, name: &str) -> Guard {
    backend
        .locker()
        .write(name)
        .wait(backend.patience)
        .await
        .unwrap_or_else(|e| panic!("write {name}: {e}"))
}

/// Whether a single read try of `name` on a fresh locker gets in (the share is released).
async fn read_gets_in(backend: &Backend, name: &str) -> bool {
    try_gets_in(backend.locker().read(name).try_acquire().await, name).await
}

/// Whether a single write try of `name` on a fresh locker gets in (the lock is released).
async fn write_gets_in(backend: &Backend, name: &str) -> bool {
    try_gets_in(backend.locker().write(name).try_acquire().await, name).await
}

async fn try_gets_in(outcome: Result<Option<Guard>, LockError>, name: &str) -> bool {
    match outcome.unwrap_or_else(|e| panic!("try {name}: {e}")) {
        Some(guard) => {
            guard
                .release()
                .await
                .unwrap_or_else(|e| panic!("release {name}: {e}"));
            true
        }
        None => false,
    }
}

async fn release(guard: Guard) {
    let name = guard.name().to_owned();
    guard
        .release()
        .await
        .unwrap_or_else(|e| panic!("release {name}: {e}"));
}

/// Several readers hold at once (each a read guard of its own), a writer does not get in
/// beside them, and does once they are gone.
pub async fn readers_share(backend: &Backend, prefix: &str) {
    let name = name(prefix, "readers-share");
    let mut readers = Vec::new();
    for _ in 0..3 {
        let guard = read(backend, &name).await;
        assert!(
            matches!(guard.kind(), Kind::Read { .. }),
            "a read grant is a read: {:?}",
            guard.kind()
        );
        assert!(!guard.is_nested(), "another locker's read is not nested");
        readers.push(guard);
    }
    let fourth = backend
        .locker()
        .read(name.as_str())
        .try_acquire()
        .await
        .expect("try read");
    readers.push(fourth.expect("a reader gets in at once beside other readers"));
    assert!(readers.iter().all(Guard::is_held), "every reader holds");
    assert!(
        !write_gets_in(backend, &name).await,
        "a writer got in beside readers"
    );
    for guard in readers {
        release(guard).await;
    }
    assert!(
        write_gets_in(backend, &name).await,
        "a writer gets in once every reader released"
    );
}

/// A writer holds alone: no reader and no other writer gets in, by a try or by a bounded wait;
/// after its release both do.
pub async fn writer_excludes_readers_and_writers(backend: &Backend, prefix: &str) {
    let name = name(prefix, "writer-excludes");
    let writer = write(backend, &name).await;
    assert!(
        matches!(writer.kind(), Kind::Write { .. }),
        "a write grant is a write: {:?}",
        writer.kind()
    );
    assert!(
        !read_gets_in(backend, &name).await,
        "a reader got in beside a writer"
    );
    assert!(
        !write_gets_in(backend, &name).await,
        "a second writer got in beside a writer"
    );
    let waited = backend
        .locker()
        .read(name.as_str())
        .wait(backend.settle)
        .await;
    assert!(
        matches!(waited, Err(LockError::Timeout { .. })),
        "a waiting reader must time out while the writer holds: {waited:?}"
    );
    let waited = backend
        .locker()
        .write(name.as_str())
        .wait(backend.settle)
        .await;
    assert!(
        matches!(waited, Err(LockError::Timeout { .. })),
        "a waiting writer must time out while the writer holds: {waited:?}"
    );
    assert!(writer.is_held());
    release(writer).await;
    // The timed-out writer withdraws its waiting record in the background: give it a moment
    // (its record would otherwise stand for its 30 s lease). Whether it must be withdrawn
    // before `acquire` returns is `gave_up_writer_lets_readers_in`'s question.
    tokio::time::sleep(backend.settle).await;
    assert!(
        read_gets_in(backend, &name).await,
        "a reader gets in after the writer released (and the timed-out writer left no record)"
    );
    assert!(
        write_gets_in(backend, &name).await,
        "a writer gets in after the writer released (and the timed-out writer left no record)"
    );
}

/// Writer preference (the default): while a reader holds and a writer waits, a new reader is
/// refused (its try answers busy) and a waiting one gets in only after the writer got in and
/// released.
pub async fn writer_preference_queues_new_readers(backend: &Backend, prefix: &str) {
    let name = name(prefix, "writer-preference");
    let first = read(backend, &name).await;
    let writer_released = Arc::new(AtomicBool::new(false));
    let queued = Arc::new(Notify::new());
    let writer = {
        let (locker, name, released) = (
            QueueWatched::locker(backend, Arc::clone(&queued)),
            name.clone(),
            Arc::clone(&writer_released),
        );
        let (patience, hold) = (backend.patience, backend.settle);
        tokio::spawn(async move {
            let guard = locker
                .write(name.as_str())
                .wait(patience)
                .await
                .expect("the waiting writer gets in once the reader released");
            tokio::time::sleep(hold).await;
            released.store(true, Ordering::SeqCst);
            guard.release().await.expect("the writer's release");
        })
    };
    // Once the store has answered the writer busy, its record is there (a fixed pause was not
    // always long enough on a loaded machine).
    backend
        .within("the writer's first busy answer", queued.notified())
        .await;
    assert!(!writer.is_finished(), "the writer got in beside a reader");
    assert!(
        !read_gets_in(backend, &name).await,
        "a new reader got in while a writer waited (writer preference)"
    );
    let late_reader = {
        let (locker, name, released) =
            (backend.locker(), name.clone(), Arc::clone(&writer_released));
        let patience = backend.patience;
        tokio::spawn(async move {
            let guard = locker
                .read(name.as_str())
                .wait(patience)
                .await
                .expect("the late reader gets in after the writer");
            assert!(
                released.load(Ordering::SeqCst),
                "a reader that arrived while the writer waited got in before the writer was done"
            );
            guard.release().await.expect("the late reader's release");
        })
    };
    tokio::time::sleep(backend.settle).await;
    assert!(
        !late_reader.is_finished(),
        "a reader that arrived while the writer waited got in ahead of it"
    );
    release(first).await;
    backend
        .within("the writer after the reader", writer)
        .await
        .expect("the writer task");
    backend
        .within("the late reader after the writer", late_reader)
        .await
        .expect("the late reader task");
}

/// A writer whose wait ran out has given up (its `acquire` returned
/// [`LockError::Timeout`]): a reader arriving right after that gets in, without waiting for
/// the writer's waiting record to be withdrawn in the background. (Readers are held back
/// "until the writer got in or gave up".)
pub async fn gave_up_writer_lets_readers_in(backend: &Backend, prefix: &str) {
    let name = name(prefix, "gave-up-writer");
    let holder = read(backend, &name).await;
    let gave_up = backend
        .locker()
        .write(name.as_str())
        .lease(Duration::from_secs(30))
        .wait(backend.settle)
        .await
        .map(drop);
    assert!(
        matches!(gave_up, Err(LockError::Timeout { .. })),
        "the writer waits beside a reader until its wait runs out: {gave_up:?}"
    );
    assert!(
        read_gets_in(backend, &name).await,
        "a writer that gave up (its acquire returned Timeout) still held a new reader back"
    );
    release(holder).await;
}

/// Writer preference off on both sides: a new reader gets in while a writer waits; the writer
/// gets in once every reader released. And off on a reader alone: it gets in beside a writer
/// that waits with preference on (which keeps a preferring reader out).
pub async fn writer_preference_off_lets_readers_in(backend: &Backend, prefix: &str) {
    let name = name(prefix, "writer-preference-off");
    let reader = |locker: Locker| {
        let name = name.clone();
        async move {
            locker
                .read(name.as_str())
                .writer_preference(false)
                .try_acquire()
                .await
                .expect("try read")
        }
    };
    let first = reader(backend.locker())
        .await
        .expect("the first reader gets in");
    let writer = {
        let (locker, name, patience) = (backend.locker(), name.clone(), backend.patience);
        tokio::spawn(async move {
            locker
                .write(name.as_str())
                .writer_preference(false)
                .wait(patience)
                .await
                .expect("the writer gets in once the readers released")
                .release()
                .await
                .expect("the writer's release");
        })
    };
    tokio::time::sleep(backend.settle).await;
    assert!(!writer.is_finished(), "the writer got in beside a reader");
    let second = reader(backend.locker())
        .await
        .expect("without writer preference a new reader gets in while a writer waits");
    assert!(!writer.is_finished(), "the writer got in beside readers");
    release(first).await;
    tokio::time::sleep(backend.settle).await;
    assert!(
        !writer.is_finished(),
        "the writer got in beside the second reader"
    );
    release(second).await;
    backend
        .within("the writer after the last reader", writer)
        .await
        .expect("the writer task");

    // A reader without writer preference gets in even beside a writer that waits with it
    // (and so recorded itself); a reader with it does not.
    let first = reader(backend.locker())
        .await
        .expect("a reader gets in after the writer");
    let writer = {
        let (locker, name, patience) = (backend.locker(), name.clone(), backend.patience);
        tokio::spawn(async move {
            locker
                .write(name.as_str())
                .wait(patience)
                .await
                .expect("the preferring writer gets in once the readers released")
                .release()
                .await
                .expect("the writer's release");
        })
    };
    tokio::time::sleep(backend.settle).await;
    assert!(
        !read_gets_in(backend, &name).await,
        "a preferring reader got in while a preferring writer waited"
    );
    let second = reader(backend.locker())
        .await
        .expect("a reader without writer preference gets in while a writer with it waits");
    release(first).await;
    release(second).await;
    backend
        .within("the preferring writer after the readers", writer)
        .await
        .expect("the writer task");
}

/// A waiting writer stays out while any reader holds, and gets in soon after the last reader
/// released.
pub async fn last_reader_release_wakes_writer(backend: &Backend, prefix: &str) {
    let name = name(prefix, "last-reader-wakes");
    let a = read(backend, &name).await;
    let b = read(backend, &name).await;
    let writer = {
        let (locker, name, patience) = (backend.locker(), name.clone(), backend.patience);
        tokio::spawn(async move {
            let guard = locker
                .write(name.as_str())
                .wait(patience)
                .await
                .expect("the writer gets in after the last reader");
            guard.fencing_token()
        })
    };
    tokio::time::sleep(backend.settle).await;
    assert!(
        !writer.is_finished(),
        "the writer got in beside two readers"
    );
    release(a).await;
    tokio::time::sleep(backend.settle).await;
    assert!(
        !writer.is_finished(),
        "the writer got in while a reader still held"
    );
    release(b).await;
    backend
        .within("the writer after the last reader's release", writer)
        .await
        .expect("the writer task");
}

/// Several readers waiting for a writer all get in after its release, and hold at the same
/// time (while they do, a writer cannot get in).
pub async fn writer_release_wakes_all_readers(backend: &Backend, prefix: &str) {
    const READERS: usize = 4;
    let name = name(prefix, "writer-wakes-readers");
    let writer = write(backend, &name).await;
    let (granted_tx, mut granted) = mpsc::channel(READERS);
    let (let_go, let_go_rx) = watch::channel(false);
    let readers: Vec<_> = (0..READERS)
        .map(|_| {
            let (locker, name, patience) = (backend.locker(), name.clone(), backend.patience);
            let (granted_tx, mut let_go_rx) = (granted_tx.clone(), let_go_rx.clone());
            tokio::spawn(async move {
                let guard = locker
                    .read(name.as_str())
                    .wait(patience)
                    .await
                    .expect("a waiting reader gets in after the writer");
                granted_tx.send(()).await.expect("the test listens");
                tokio::time::timeout(patience, let_go_rx.wait_for(|go| *go))
                    .await
                    .expect("told to let go in time")
                    .expect("the test lives");
                guard.release().await.expect("the reader's release");
            })
        })
        .collect();
    drop(granted_tx);
    tokio::time::sleep(backend.settle).await;
    assert!(
        granted.try_recv().is_err(),
        "a reader got in beside the writer"
    );
    release(writer).await;
    for n in 0..READERS {
        backend
            .within(
                &format!("reader {n} of {READERS} after the writer"),
                async {
                    granted.recv().await.expect("a reader task ended early");
                },
            )
            .await;
    }
    // Every reader holds now, none has been told to let go: they overlap.
    assert!(
        !write_gets_in(backend, &name).await,
        "a writer got in beside {READERS} readers"
    );
    let_go.send_replace(true);
    for reader in readers {
        backend
            .within("a reader's release", reader)
            .await
            .expect("the reader task");
    }
    assert!(
        write_gets_in(backend, &name).await,
        "a writer gets in after all readers"
    );
}

/// A read's fencing token is the last write's: not below the write before it, and below the
/// write after it.
pub async fn read_fencing_token_is_last_write(backend: &Backend, prefix: &str) {
    let name = name(prefix, "read-fencing");
    let w1 = write(backend, &name).await;
    let t1 = w1.fencing_token();
    release(w1).await;
    let r1 = read(backend, &name).await;
    let r2 = read(backend, &name).await;
    for r in [&r1, &r2] {
        assert!(
            r.fencing_token() >= t1,
            "a read after the write {t1} has the fencing token {}",
            r.fencing_token()
        );
    }
    let read_token = r1.fencing_token().max(r2.fencing_token());
    release(r1).await;
    release(r2).await;
    let w2 = write(backend, &name).await;
    let t2 = w2.fencing_token();
    assert!(
        t2 > t1,
        "write fencing tokens grow: {t1} then {t2} on one name"
    );
    assert!(
        t2 > read_token,
        "a write after reads with the token {read_token} has {t2}"
    );
    release(w2).await;
    let r3 = read(backend, &name).await;
    assert!(
        r3.fencing_token() >= t2,
        "a read after the write {t2} has the fencing token {}",
        r3.fencing_token()
    );
    release(r3).await;
}

/// Each reader holds a lease of its own: a reader with a fixed TTL expires while another,
/// renewed, stays held (renewing one never keeps the other alive, and the expiry of one
/// never frees the name while the other holds).
pub async fn each_reader_renewed_alone(backend: &Backend, prefix: &str) {
    let name = name(prefix, "reader-leases");
    let ttl = backend.short_ttl;
    let fixed = backend
        .locker()
        .read(name.as_str())
        .fixed_ttl(ttl)
        .wait(backend.patience)
        .await
        .expect("the fixed reader gets in");
    let renewed = backend
        .locker()
        .read(name.as_str())
        .lease(ttl)
        .wait(backend.patience)
        .await
        .expect("the renewed reader gets in");
    assert!(renewed.is_renewing() && !fixed.is_renewing());
    backend
        .within("the fixed reader's expiry", fixed.lost())
        .await;
    // Several of its leases after the other reader's expiry, the renewed one still holds.
    tokio::time::sleep(ttl * 2).await;
    assert!(
        renewed.is_held(),
        "the renewed reader lost its share when the other one expired"
    );
    assert!(
        !write_gets_in(backend, &name).await,
        "a writer got in while a renewed reader held (its share expired with the other's)"
    );
    assert!(
        matches!(fixed.release().await, Err(LockError::NotOwned { .. })),
        "the expired reader's share was kept alive by the other's renewal"
    );
    release(renewed).await;
    assert!(
        write_gets_in(backend, &name).await,
        "a writer gets in after the last reader released"
    );
}

/// Reentrancy per task: read in write, write in write and read in read give nested guards on
/// the same lease (releasing them keeps it); write in read is refused at once with
/// [`LockError::UpgradeRefused`]; another task is not nested.
pub async fn reentrancy(backend: &Backend, prefix: &str) {
    let name = name(prefix, "reentrancy");
    let locker = backend.locker();
    let outside = backend.clone();
    let task = {
        let (locker, name, backend) = (locker.clone(), name.clone(), backend.clone());
        tokio::spawn(async move {
            let outer = write(&backend, &name).await; // another locker: not nested
            assert!(!outer.is_nested());
            release(outer).await;

            let outer = locker
                .write(name.as_str())
                .wait(backend.patience)
                .await
                .expect("write");
            assert!(!outer.is_nested(), "the first write is not nested");
            let in_write = locker
                .write(name.as_str())
                .try_acquire()
                .await
                .expect("write in write")
                .expect("write in write is granted");
            assert!(in_write.is_nested(), "write in write is nested");
            let read_in_write = locker
                .read(name.as_str())
                .wait(backend.settle)
                .await
                .expect("read in write is granted at once");
            assert!(read_in_write.is_nested(), "read in write is nested");
            assert_eq!(read_in_write.fencing_token(), outer.fencing_token());
            read_in_write.release().await.expect("nested release");
            in_write.release().await.expect("nested release");
            assert!(outer.is_held());
            assert!(
                !read_gets_in(&backend, &name).await && !write_gets_in(&backend, &name).await,
                "releasing nested guards released the write lock"
            );
            // Another task of the same locker is not nested.
            let other_task = {
                let (locker, name) = (locker.clone(), name.clone());
                tokio::spawn(async move {
                    locker
                        .read(name.as_str())
                        .try_acquire()
                        .await
                        .expect("try")
                        .map(|guard| guard.is_nested())
                })
            };
            assert_eq!(
                other_task.await.expect("the other task"),
                None,
                "another task got a read beside this task's write"
            );
            release(outer).await;

            let outer = locker
                .read(name.as_str())
                .wait(backend.patience)
                .await
                .expect("read");
            assert!(!outer.is_nested());
            let read_in_read = locker
                .read(name.as_str())
                .try_acquire()
                .await
                .expect("read in read")
                .expect("read in read is granted");
            assert!(read_in_read.is_nested(), "read in read is nested");
            let upgrade = locker
                .write(name.as_str())
                .wait(backend.patience)
                .await
                .map(drop);
            assert!(
                matches!(upgrade, Err(LockError::UpgradeRefused { .. })),
                "write in read must be refused at once: {upgrade:?}"
            );
            let upgrade = locker.write(name.as_str()).try_acquire().await.map(drop);
            assert!(
                matches!(upgrade, Err(LockError::UpgradeRefused { .. })),
                "a write try in read must be refused: {upgrade:?}"
            );
            read_in_read.release().await.expect("nested release");
            assert!(
                !write_gets_in(&backend, &name).await,
                "releasing the nested read released the share"
            );
            release(outer).await;
        })
    };
    outside
        .within(
            "the reentrancy task (an upgrade that waits deadlocks)",
            task,
        )
        .await
        .expect("the reentrancy task");
    assert!(
        write_gets_in(backend, &name).await,
        "a writer gets in after the outermost guards released"
    );
}

/// Read and write acquires dropped while they wait (after any number of polls) leave nothing
/// behind: no share, no waiting writer's record. [`Backend::settle`] after the drops (the
/// cleanup runs in the background) and right after the holder's release, a writer, then a
/// reader, get in at once (the dropped requests asked for 30 s leases, which leftovers would
/// hold).
pub async fn cancelled_acquires_leave_nothing(backend: &Backend, prefix: &str) {
    let name = name(prefix, "cancelled-rw");
    let pause = backend.settle / 20;
    let lease = Duration::from_secs(30);
    let (readers, writers) = (backend.locker(), backend.locker());
    for holder_writes in [true, false] {
        let holder = if holder_writes {
            write(backend, &name).await
        } else {
            read(backend, &name).await
        };
        for polls in 0..12 {
            let read = readers
                .read(name.as_str())
                .lease(lease)
                .wait(backend.patience);
            // A read beside a reader completes: its guard is dropped, released in the
            // background.
            poll_then_drop(read.acquire(), polls, pause).await;
            let write = writers
                .write(name.as_str())
                .lease(lease)
                .wait(backend.patience);
            assert!(
                !poll_then_drop(write.acquire(), polls, pause).await,
                "a writer got in beside a holder"
            );
        }
        // Cleanup of dropped requests runs in the background: give it a moment.
        tokio::time::sleep(backend.settle).await;
        release(holder).await;
        assert!(
            write_gets_in(backend, &name).await,
            "dropped acquires left something behind (holder: {}): no writer gets in at once",
            if holder_writes { "writer" } else { "reader" }
        );
        assert!(
            read_gets_in(backend, &name).await,
            "a dropped write acquire left its waiting record: readers are refused"
        );
    }
}
