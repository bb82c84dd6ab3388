//! `read`, `write` and `max = n, permits = k`: the attribute takes a read share, the write lock
//! or semaphore permits instead of the mutex, with every other option unchanged. All on a
//! `MemoryLock` (the kinds need no server).

use std::sync::Arc;
use std::time::Duration;

use distlock::{Kind, LockError, Locker, MemoryLock, TimeoutPhase, distributed_lock};
use tokio::sync::{Barrier, oneshot};
use tokio::time::{sleep, timeout};

use crate::common::SOON;

/// The kind of the lease the locked body sees, written out (`Debug`).
fn current() -> String {
    format!(
        "{:?}",
        distlock::current_lease()
            .expect("inside a locked fn")
            .kind()
    )
}

/// Checks that a kind `current()` wrote out is `kind`.
#[track_caller]
fn assert_kind(seen: &str, kind: Kind) {
    assert_eq!(seen, format!("{kind:?}"), "the lease's kind");
}

const READ: Kind = Kind::Read {
    writer_preference: true,
};
const WRITE: Kind = Kind::Write {
    writer_preference: true,
};

#[distributed_lock("doc:{id}", read, locker = locker)]
async fn read_doc(locker: &Locker, id: u64, both_inside: &Barrier) -> Result<String, LockError> {
    // Returns only once two callers are inside at the same time.
    both_inside.wait().await;
    Ok(current())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_share_the_lock() {
    let locker = Locker::new(MemoryLock::new());
    let both_inside = Arc::new(Barrier::new(2));
    // Two tasks: in one task the second read would re-enter the first one's lease.
    let readers = [(); 2].map(|()| {
        let (locker, both_inside) = (locker.clone(), Arc::clone(&both_inside));
        tokio::spawn(async move { read_doc(&locker, 1, &both_inside).await })
    });
    for reader in readers {
        let kind = timeout(SOON, reader)
            .await
            .expect("the readers overlap: each waits for the other inside")
            .expect("no panic")
            .expect("granted");
        assert_kind(&kind, READ);
    }
}

#[distributed_lock("doc:{id}", write, locker = locker)]
async fn write_doc(
    locker: &Locker,
    id: u64,
    inside: oneshot::Sender<String>,
    done: oneshot::Receiver<()>,
) -> Result<(), LockError> {
    inside.send(current()).expect("the test listens");
    done.await.expect("the test finishes the write");
    Ok(())
}

#[distributed_lock("doc:{id}", read, locker = locker, wait = "100ms")]
async fn read_briefly(locker: &Locker, id: u64) -> Result<(), LockError> {
    Ok(())
}

#[distributed_lock("doc:{id}", read, locker = locker, skip)]
async fn read_if_free(locker: &Locker, id: u64) -> Option<()> {
    Some(())
}

#[distributed_lock("doc:{id}", write, locker = locker, skip)]
async fn write_if_free(locker: &Locker, id: u64) -> Option<()> {
    Some(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_excludes_readers() {
    let locker = Locker::new(MemoryLock::new());
    let (inside_tx, inside) = oneshot::channel();
    let (done, done_rx) = oneshot::channel();
    let writer = tokio::spawn({
        let locker = locker.clone();
        async move { write_doc(&locker, 2, inside_tx, done_rx).await }
    });
    let kind = timeout(SOON, inside).await.expect("granted").expect("sent");
    assert_kind(&kind, WRITE);

    let refused = read_briefly(&locker, 2).await;
    assert!(
        matches!(
            refused,
            Err(LockError::Timeout {
                phase: TimeoutPhase::Wait,
                ..
            })
        ),
        "a reader waits out its wait behind the writer: {refused:?}"
    );
    assert_eq!(read_if_free(&locker, 2).await, None, "skipped");
    assert_eq!(write_if_free(&locker, 2).await, None, "one writer");
    assert_eq!(read_if_free(&locker, 3).await, Some(()), "another name");
    let mutex = locker.lock("doc:2").try_acquire().await.expect("no error");
    assert!(
        mutex.is_some(),
        "the mutex of the same name is another lock"
    );
    drop(mutex);

    done.send(()).expect("the writer waits");
    timeout(SOON, writer)
        .await
        .expect("finished")
        .expect("no panic")
        .expect("granted");
    assert_eq!(read_if_free(&locker, 2).await, Some(()), "free again");
    read_briefly(&locker, 2).await.expect("free again");
}

#[distributed_lock("doc:{id}", read, locker = locker)]
async fn hold_read(locker: &Locker, id: u64, done: oneshot::Receiver<()>) -> Result<(), LockError> {
    done.await.expect("the test finishes the read");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_excludes_writers() {
    let locker = Locker::new(MemoryLock::new());
    let (done, done_rx) = oneshot::channel();
    let reader = tokio::spawn({
        let locker = locker.clone();
        async move { hold_read(&locker, 4, done_rx).await }
    });
    sleep(Duration::from_millis(50)).await;
    assert_eq!(write_if_free(&locker, 4).await, None, "a reader holds it");
    assert_eq!(read_if_free(&locker, 4).await, Some(()), "readers share");
    done.send(()).expect("the reader waits");
    timeout(SOON, reader)
        .await
        .expect("finished")
        .expect("no panic")
        .expect("granted");
    assert_eq!(write_if_free(&locker, 4).await, Some(()), "free again");
}

#[distributed_lock("doc:{id}", read, locker = locker)]
async fn read_then_write(locker: &Locker, id: u64) -> Result<(), LockError> {
    assert_eq!(
        write_if_free(locker, id).await,
        None,
        "with `skip`: refused, skipped"
    );
    write_inside(locker, id).await
}

#[distributed_lock("doc:{id}", write, locker = locker)]
async fn write_inside(locker: &Locker, id: u64) -> Result<(), LockError> {
    Ok(())
}

#[distributed_lock("doc:{id}", write, locker = locker)]
async fn write_then_read(locker: &Locker, id: u64) -> Result<String, LockError> {
    read_inside(locker, id).await
}

#[distributed_lock("doc:{id}", read, locker = locker)]
async fn read_inside(locker: &Locker, id: u64) -> Result<String, LockError> {
    Ok(current())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nested_calls_read_under_a_write_but_never_upgrade() {
    let locker = Locker::new(MemoryLock::new());
    let nested = tokio::spawn({
        let locker = locker.clone();
        async move { write_then_read(&locker, 5).await }
    });
    let kind = timeout(SOON, nested)
        .await
        .expect("no wait for itself")
        .expect("no panic")
        .expect("a read inside the write re-enters it");
    assert_kind(&kind, WRITE); // the nested call sees the write lease

    let upgrade = tokio::spawn({
        let locker = locker.clone();
        async move { read_then_write(&locker, 5).await }
    });
    let refused = timeout(SOON, upgrade)
        .await
        .expect("refused at once")
        .expect("no panic");
    assert!(
        matches!(&refused, Err(LockError::UpgradeRefused { name }) if name == "doc:5"),
        "{refused:?}"
    );
}

#[distributed_lock("pdf-workers", permits = 2, max = 3, locker = locker)]
async fn convert(
    locker: &Locker,
    inside: oneshot::Sender<String>,
    done: oneshot::Receiver<()>,
) -> Result<(), LockError> {
    inside.send(current()).expect("the test listens");
    done.await.expect("the test finishes the conversion");
    Ok(())
}

#[distributed_lock("pdf-workers", permits = 2, max = 3, locker = locker, wait = "100ms")]
async fn convert_briefly(locker: &Locker) -> Result<String, LockError> {
    Ok(current())
}

#[distributed_lock("pdf-workers", permits = 2, max = 3, locker = locker, skip)]
async fn convert_if_free(locker: &Locker) -> Option<()> {
    Some(())
}

#[distributed_lock("pdf-workers", max = 3, locker = locker, skip)]
async fn one_permit(locker: &Locker) -> Option<(String, u32)> {
    let free = locker
        .semaphore("pdf-workers", 3)
        .available()
        .await
        .expect("available");
    Some((current(), free))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_semaphore_admits_callers_while_permits_last() {
    let locker = Locker::new(MemoryLock::new());
    let (inside_tx, inside) = oneshot::channel();
    let (done, done_rx) = oneshot::channel();
    let first = tokio::spawn({
        let locker = locker.clone();
        async move { convert(&locker, inside_tx, done_rx).await }
    });
    let kind = timeout(SOON, inside).await.expect("granted").expect("sent");
    assert_kind(&kind, Kind::Semaphore { permits: 2, max: 3 });
    let semaphore = locker.semaphore("pdf-workers", 3);
    assert_eq!(
        semaphore.available().await.ok(),
        Some(1),
        "the body holds 2 of 3"
    );

    // A second caller for 2 permits does not fit beside the first.
    assert_eq!(
        convert_if_free(&locker).await,
        None,
        "skipped: 1 permit free"
    );
    let refused = convert_briefly(&locker).await;
    assert!(
        matches!(
            refused,
            Err(LockError::Timeout {
                phase: TimeoutPhase::Wait,
                ..
            })
        ),
        "{refused:?}"
    );
    // One permit does.
    let (kind, free) = one_permit(&locker).await.expect("the third permit is free");
    assert_kind(&kind, Kind::Semaphore { permits: 1, max: 3 });
    assert_eq!(free, 0, "the last permit, beside the first caller's two");
    assert_eq!(semaphore.available().await.ok(), Some(1), "returned");

    done.send(()).expect("the first caller waits");
    timeout(SOON, first)
        .await
        .expect("finished")
        .expect("no panic")
        .expect("granted");
    assert_eq!(semaphore.available().await.ok(), Some(3), "all returned");
    let kind = convert_briefly(&locker).await.expect("free again");
    assert_kind(&kind, Kind::Semaphore { permits: 2, max: 3 });
}

#[distributed_lock("pdf-workers", max = 4, locker = locker)]
async fn with_another_max(locker: &Locker) -> Result<(), LockError> {
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_holder_gives_the_same_max() {
    let locker = Locker::new(MemoryLock::new());
    let (inside_tx, inside) = oneshot::channel();
    let (done, done_rx) = oneshot::channel();
    let first = tokio::spawn({
        let locker = locker.clone();
        async move { convert(&locker, inside_tx, done_rx).await }
    });
    timeout(SOON, inside).await.expect("granted").expect("sent");
    let refused = with_another_max(&locker).await;
    assert!(
        matches!(
            refused,
            Err(LockError::PermitsMismatch {
                max: 4,
                held_max: 3,
                ..
            })
        ),
        "{refused:?}"
    );
    done.send(()).expect("the first caller waits");
    timeout(SOON, first)
        .await
        .expect("finished")
        .expect("no panic")
        .expect("granted");
}

#[distributed_lock("report", max = 2, locker = locker, skip, ttl = "5s", min_hold = "400ms")]
async fn report(locker: &Locker) -> Option<()> {
    Some(())
}

#[distributed_lock("doc:{id}", read, locker = locker, ttl = "5s", min_hold = "400ms", name = "doc")]
async fn read_and_keep(locker: &Locker, id: u64) -> Result<(), LockError> {
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn min_hold_keeps_permits_and_read_shares() {
    let locker = Locker::new(MemoryLock::new());
    let semaphore = locker.semaphore("report", 2);
    assert_eq!(report(&locker).await, Some(()));
    assert_eq!(
        semaphore.available().await.ok(),
        Some(1),
        "kept for min_hold"
    );
    assert_eq!(report(&locker).await, Some(()), "the second permit");
    assert_eq!(report(&locker).await, None, "both kept");

    read_and_keep(&locker, 6).await.expect("granted");
    assert_eq!(
        write_if_free(&locker, 6).await,
        None,
        "the read share is kept"
    );
    assert_eq!(
        read_if_free(&locker, 6).await,
        Some(()),
        "readers still share"
    );

    sleep(Duration::from_millis(600)).await;
    assert_eq!(
        semaphore.available().await.ok(),
        Some(2),
        "expired at min_hold"
    );
    assert_eq!(
        write_if_free(&locker, 6).await,
        Some(()),
        "expired at min_hold"
    );
}

#[distributed_lock("big", max = 1000000, permits = 1000000, locker = locker)]
async fn everything(locker: &Locker) -> Result<(), LockError> {
    Ok(())
}

#[tokio::test]
async fn the_largest_semaphore_the_attribute_accepts_is_the_largest_there_is() {
    // The attribute refuses `max` above 1 000 000 at compile time: the same bound.
    assert_eq!(distlock::MAX_PERMITS, 1_000_000);
    let locker = Locker::new(MemoryLock::new());
    everything(&locker).await.expect("granted");
}

#[async_trait::async_trait]
trait Store {
    async fn load(&self, id: u64) -> Result<String, LockError>;
}

struct Docs {
    locker: Locker,
}

#[async_trait::async_trait]
impl Store for Docs {
    #[distributed_lock("doc:{id}", read, locker = self.locker)]
    async fn load(&self, id: u64) -> Result<String, LockError> {
        Ok(current())
    }
}

#[tokio::test]
async fn kinds_work_in_async_trait_methods() {
    let docs = Docs {
        locker: Locker::new(MemoryLock::new()),
    };
    let kind = docs.load(8).await.expect("granted");
    assert_kind(&kind, READ);
}

#[distributed_lock("job:{id}", fair, locker = locker)]
async fn fair_job(locker: &Locker, id: u64) -> Result<String, LockError> {
    // The plain mutex of the same name is held by this call.
    let plain = locker
        .lock(format!("job:{id}"))
        .try_acquire()
        .await?
        .is_none();
    assert!(plain, "the fair lock is the mutex of its name");
    Ok(current())
}

#[tokio::test]
async fn fair_takes_the_mutex_through_the_queue() {
    let locker = Locker::new(MemoryLock::new());
    let kind = fair_job(&locker, 3).await.expect("granted");
    assert_kind(&kind, Kind::Fair { queued: true });
}
