//! The Locker's policy for the lock kinds, on a paused clock: input checks, reentrancy rules,
//! the waiting writer's record kept alive and withdrawn, one line per kind, and the metrics.

use std::sync::Arc;
use std::time::Duration;

use crate::common::{Probe, probe_locker, slow_polling_locker};
use lock_core::{Kind, LockError, Locker, MemoryLock};

fn memory() -> Locker {
    Locker::new(MemoryLock::new())
}

#[tokio::test(start_paused = true)]
async fn options_that_do_not_fit_the_kind_are_invalid_input() {
    let locker = memory();
    let cases = [
        locker.lock("a").permits(2).try_acquire().await.map(drop),
        locker.read("a").permits(2).try_acquire().await.map(drop),
        locker
            .lock("a")
            .writer_preference(false)
            .try_acquire()
            .await
            .map(drop),
        locker.semaphore("a", 0).try_acquire().await.map(drop),
        locker
            .semaphore("a", 3)
            .permits(0)
            .try_acquire()
            .await
            .map(drop),
        locker
            .semaphore("a", 3)
            .permits(4)
            .try_acquire()
            .await
            .map(drop),
        locker
            .semaphore("a", lock_core::MAX_PERMITS + 1)
            .try_acquire()
            .await
            .map(drop),
        locker.lock("a").available().await.map(drop),
    ];
    for (i, case) in cases.into_iter().enumerate() {
        assert!(
            matches!(case, Err(LockError::InvalidInput { .. })),
            "case {i}: {case:?}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn reads_and_writes_nest_in_one_task_but_a_write_inside_a_read_is_refused() {
    // Reentrancy is per task: the test's own future is not one.
    tokio::spawn(nesting()).await.expect("no panic");
}

async fn nesting() {
    let locker = memory();
    let outer = locker.write("doc").await.expect("free");
    let read_inside = locker.read("doc").await.expect("nested");
    let write_inside = locker.write("doc").await.expect("nested");
    assert!(read_inside.is_nested() && write_inside.is_nested());
    assert_eq!(read_inside.fencing_token(), outer.fencing_token());
    drop((read_inside, write_inside));
    outer.release().await.expect("ours");

    let read = locker.read("doc").await.expect("free");
    assert!(locker.read("doc").await.expect("nested").is_nested());
    let upgrade = locker.write("doc").wait(Duration::from_secs(60)).await;
    assert!(
        matches!(upgrade, Err(LockError::UpgradeRefused { ref name }) if name == "doc"),
        "refused at once, not after the wait: {upgrade:?}"
    );
    // The mutex of the same name is another lock: not nested, not refused.
    let mutex = locker.lock("doc").await.expect("free");
    assert!(!mutex.is_nested());
    drop(mutex);
    read.release().await.expect("ours");

    // Permits do not nest: asking again takes more.
    let first = locker.semaphore("pool", 2).await.expect("free");
    let second = locker.semaphore("pool", 2).await.expect("free");
    assert!(!second.is_nested());
    assert!(
        locker
            .semaphore("pool", 2)
            .try_acquire()
            .await
            .expect("answers")
            .is_none()
    );
    drop((first, second));
}

#[tokio::test(start_paused = true)]
async fn a_waiting_writer_renews_its_record_and_withdraws_it_when_it_gives_up() {
    let (probe, locker) = probe_locker(Duration::from_secs(30));
    // The store does not say how long the reader holds: the writer's own record sets the pace.
    probe
        .hides_holder_ttl
        .store(true, std::sync::atomic::Ordering::SeqCst);
    // A reader holding for a long time: its lease is renewed, far beyond the writer's TTL.
    let reader = locker.read("doc").await.expect("free");
    // Another "process" on the same store, whose polls alone would come every 10 s: the
    // writer's attempts that renew its record are paced by the record's own TTL.
    let writer_locker = slow_polling_locker(&probe);
    let before = probe.count(&probe.attempts);
    let writer = tokio::spawn(async move {
        writer_locker
            .write("doc")
            .fixed_ttl(Duration::from_secs(2))
            .wait(Duration::from_secs(10))
            .await
            .map(drop)
    });
    // Over 5 s the record (2 s TTL) would lapse twice without renewal: readers arriving late
    // must still be refused the whole time.
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let late = locker.read("late").try_acquire().await.expect("answers");
        assert!(late.is_some(), "another name is unaffected");
        let behind = Locker::new(Arc::clone(&probe))
            .read("doc")
            .try_acquire()
            .await
            .expect("answers");
        assert!(
            behind.is_none(),
            "a new reader queues behind the waiting writer"
        );
    }
    let attempts = probe.count(&probe.attempts) - before;
    assert!(
        attempts >= 5,
        "the writer tried at least every half TTL (1 s): {attempts} attempts in 5 s"
    );
    writer.abort(); // the writer gives up (cancelled)
    let _ = writer.await;
    tokio::task::yield_now().await; // the background release withdraws the record
    let reader_after = Locker::new(Arc::clone(&probe))
        .read("doc")
        .try_acquire()
        .await
        .expect("answers");
    assert!(
        reader_after.is_some(),
        "no record left by the writer that gave up"
    );
    drop(reader_after);
    reader.release().await.expect("ours");
}

#[tokio::test(start_paused = true)]
async fn a_single_write_try_records_nothing() {
    let locker = memory();
    let reader = locker.read("doc").await.expect("free");
    assert!(
        locker
            .write("doc")
            .try_acquire()
            .await
            .expect("answers")
            .is_none()
    );
    let other = Locker::new(MemoryLock::new());
    drop(other);
    let second = locker.read("doc").try_acquire().await.expect("answers");
    assert!(second.is_some(), "a failed single try holds no reader back");
    drop(second);
    reader.release().await.expect("ours");
}

#[tokio::test(start_paused = true)]
async fn readers_do_not_queue_behind_a_local_writer_line_and_get_in_together_after_it() {
    let (probe, locker) = probe_locker(Duration::from_secs(30));
    let writer = locker.write("doc").await.expect("free");
    let readers: Vec<_> = (0..5)
        .map(|_| {
            let locker = locker.clone();
            tokio::spawn(async move {
                let guard = locker
                    .read("doc")
                    .wait(Duration::from_secs(5))
                    .await
                    .expect("after the writer");
                tokio::time::sleep(Duration::from_secs(1)).await; // held together
                guard.release().await.expect("ours");
                tokio::time::Instant::now()
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let released = tokio::time::Instant::now();
    writer.release().await.expect("ours");
    for reader in readers {
        let done = reader.await.expect("no panic");
        assert!(
            done - released < Duration::from_millis(1_100),
            "the readers overlapped: {:?}",
            done - released
        );
    }
    assert_eq!(probe.inner.held_count(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_waiter_for_k_permits_gets_them_when_k_are_free() {
    let locker = memory();
    let a = locker.semaphore("pool", 3).await.expect("free");
    let b = locker.semaphore("pool", 3).await.expect("free");
    let waiter = {
        let locker = locker.clone();
        tokio::spawn(async move {
            locker
                .semaphore("pool", 3)
                .permits(3)
                .wait(Duration::from_secs(10))
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    a.release().await.expect("ours");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!waiter.is_finished(), "two free permits are not three");
    b.release().await.expect("ours");
    let three = tokio::time::timeout(Duration::from_secs(1), waiter)
        .await
        .expect("woken when all three are free")
        .expect("no panic")
        .expect("granted");
    assert_eq!(three.kind(), Kind::Semaphore { permits: 3, max: 3 });
    assert_eq!(
        locker
            .semaphore("pool", 3)
            .available()
            .await
            .expect("answers"),
        0
    );
}

#[tokio::test(start_paused = true)]
async fn fair_waiters_of_several_lockers_are_granted_in_arrival_order() {
    let store = Arc::new(MemoryLock::new());
    let holder = Locker::new(Arc::clone(&store))
        .fair("job")
        .await
        .expect("free");
    let (order_tx, mut order_rx) = tokio::sync::mpsc::unbounded_channel();
    for id in 0..4 {
        // A locker each: four "processes", each with its own local line.
        let (locker, order) = (Locker::new(Arc::clone(&store)), order_tx.clone());
        tokio::spawn(async move {
            let guard = locker
                .fair("job")
                .wait(Duration::from_secs(60))
                .await
                .expect("granted in turn");
            order.send(id).expect("open");
            guard.release().await.expect("ours");
        });
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    holder.release().await.expect("ours");
    let mut order = Vec::new();
    for _ in 0..4 {
        order.push(order_rx.recv().await.expect("open"));
    }
    assert_eq!(order, [0, 1, 2, 3]);
}

#[tokio::test(start_paused = true)]
async fn a_fair_waiter_that_vanished_blocks_only_until_its_entry_lapses() {
    use lock_core::backend::{Attempt, Lock};
    use lock_core::{FAIR_ENTRY_TTL, Token};
    let store = Arc::new(MemoryLock::new());
    let ttl = Duration::from_secs(30);
    let fair = Kind::Fair { queued: true };
    // A process that queued once and died: its entry is first, and nobody renews it.
    let holder = store
        .try_acquire_kind("job", fair, Token::generate().expect("token"), ttl)
        .await
        .expect("answers");
    let dead = store
        .try_acquire_kind("job", fair, Token::generate().expect("token"), ttl)
        .await
        .expect("answers");
    assert!(matches!(dead, Attempt::Busy { .. }));
    let Attempt::Acquired(held) = holder else {
        panic!("free")
    };
    assert!(store.release(&held).await.expect("answers"));
    let started = tokio::time::Instant::now();
    let guard = Locker::new(Arc::clone(&store))
        .fair("job")
        .wait(Duration::from_secs(60))
        .await
        .expect("granted after the dead entry lapsed");
    let waited = started.elapsed();
    assert!(
        waited >= FAIR_ENTRY_TTL - Duration::from_millis(100)
            && waited <= FAIR_ENTRY_TTL + FAIR_ENTRY_TTL / 2,
        "{waited:?}"
    );
    guard.release().await.expect("ours");
}

#[tokio::test(start_paused = true)]
async fn a_cancelled_fair_waiter_withdraws_and_the_next_goes_first() {
    let store = Arc::new(MemoryLock::new());
    let holder = Locker::new(Arc::clone(&store))
        .fair("job")
        .await
        .expect("free");
    let first = tokio::spawn({
        let locker = Locker::new(Arc::clone(&store));
        async move { locker.fair("job").wait_forever().await.map(drop) }
    });
    tokio::time::sleep(Duration::from_millis(10)).await;
    let second = tokio::spawn({
        let locker = Locker::new(Arc::clone(&store));
        async move {
            let guard = locker.fair("job").wait(Duration::from_secs(60)).await?;
            let at = tokio::time::Instant::now();
            guard.release().await.map(|()| at)
        }
    });
    tokio::time::sleep(Duration::from_millis(10)).await;
    first.abort();
    let _ = first.await;
    tokio::time::sleep(Duration::from_millis(10)).await;
    let released = tokio::time::Instant::now();
    holder.release().await.expect("ours");
    let granted = second.await.expect("no panic").expect("granted");
    assert!(
        granted - released < Duration::from_secs(2),
        "not held back by the cancelled waiter's entry: {:?}",
        granted - released
    );
}

/// A fair waiter of another process whose polls come every 10 s still renews its queue entry
/// before it lapses (at half its TTL), so a waiter that came later stays behind it.
#[tokio::test(start_paused = true)]
async fn a_slow_polling_fair_waiter_keeps_its_place_in_the_queue() {
    let probe = Arc::new(Probe::default());
    let holder = Locker::new(Arc::clone(&probe))
        .fair("job")
        .fixed_ttl(Duration::from_secs(60))
        .await
        .expect("free");
    let (order_tx, mut order_rx) = tokio::sync::mpsc::unbounded_channel();
    let first = {
        let (locker, order) = (slow_polling_locker(&probe), order_tx.clone());
        tokio::spawn(async move {
            let guard = locker
                .fair("job")
                .fixed_ttl(Duration::from_secs(2))
                .wait(Duration::from_secs(60))
                .await
                .expect("granted in turn");
            order.send("first").expect("open");
            guard.release().await.expect("ours");
        })
    };
    // Long past the first waiter's entry TTL: only its renewals keep it in the queue.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let later = {
        let (locker, order) = (Locker::new(Arc::clone(&probe)), order_tx);
        tokio::spawn(async move {
            let guard = locker
                .fair("job")
                .wait(Duration::from_secs(60))
                .await
                .expect("granted in turn");
            order.send("later").expect("open");
            guard.release().await.expect("ours");
        })
    };
    tokio::time::sleep(Duration::from_secs(3)).await;
    holder.release().await.expect("ours");
    let order = [
        order_rx.recv().await.expect("open"),
        order_rx.recv().await.expect("open"),
    ];
    assert_eq!(order, ["first", "later"]);
    first.await.expect("task");
    later.await.expect("task");
}

/// `writer_preference(false)` on a writer records nothing while it waits: readers arriving
/// later still get in beside the reader that holds.
#[tokio::test(start_paused = true)]
async fn a_writer_without_preference_lets_later_readers_in() {
    let store = Arc::new(MemoryLock::new());
    let reader = Locker::new(Arc::clone(&store))
        .read("doc")
        .await
        .expect("free");
    let writer = {
        let locker = Locker::new(Arc::clone(&store));
        tokio::spawn(async move {
            locker
                .write("doc")
                .writer_preference(false)
                .wait(Duration::from_secs(5))
                .await
                .map(drop)
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let later = Locker::new(Arc::clone(&store))
        .read("doc")
        .try_acquire()
        .await
        .expect("answers");
    assert!(
        later.is_some(),
        "a waiting writer without preference kept a reader out"
    );
    drop(later);
    reader.release().await.expect("ours");
    writer
        .await
        .expect("task")
        .expect("the writer gets in once no reader holds");
}
