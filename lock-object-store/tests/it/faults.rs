//! Faults on a real S3 server: the server killed and restarted on its data while lockers
//! contend (no two holders at once, fencing tokens still increasing), and a holder paused
//! past its lease whose late write is refused by the fence.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use lock_core::{Fence, LockError, Locker};
use lock_object_store::{ObjectStoreLock, fenced_put};
use lock_testkit::SeaweedfsServer;
use tokio::time::Instant;

use crate::common;

/// The short lease of these tests: a takeover waits at least one.
const LEASE: Duration = Duration::from_millis(800);

/// One holder's time inside: from its grant to its release or the end of its validity.
#[derive(Debug, Clone, Copy)]
struct Held {
    from: Instant,
    to: Instant,
    token: u64,
}

/// Contends on one name from `lockers` tasks until `until` (which the caller may move),
/// recording every hold.
async fn contend(
    locks: Vec<ObjectStoreLock>,
    until: Arc<Mutex<Instant>>,
    holds: Arc<Mutex<Vec<Held>>>,
) {
    let tasks = locks.into_iter().map(|lock| {
        let (holds, until) = (Arc::clone(&holds), Arc::clone(&until));
        tokio::spawn(async move {
            let locker = Locker::new(lock);
            for _ in 0..200 {
                if Instant::now() >= *until.lock().unwrap_or_else(PoisonError::into_inner) {
                    break;
                }
                let Ok(guard) = locker
                    .lock("contended")
                    .fixed_ttl(LEASE)
                    .wait(Duration::from_secs(3))
                    .await
                else {
                    continue;
                };
                let from = Instant::now();
                let lease = guard.lease();
                tokio::time::sleep(Duration::from_millis(20)).await;
                let to = Instant::now().min(lease.valid_until());
                let _ = guard.release().await;
                holds
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(Held {
                        from,
                        to,
                        token: lease.fencing_token(),
                    });
            }
        })
    });
    for task in futures::future::join_all(tasks).await {
        task.expect("a contender panicked");
    }
}

/// The server killed (`SIGKILL`) and started again on its data while three lockers contend:
/// never two holders at once, fencing tokens increasing. Run last by
/// `errors::on_one_s3_server`, which owns its server alone (nextest runs each test in a process
/// of its own), so no other test sees the kill.
pub(crate) async fn killed_and_restarted_server_gives_no_overlap(mut server: SeaweedfsServer) {
    let locks: Vec<_> = (0..3).map(|_| common::lock_on(&server, "faults")).collect();
    let holds = Arc::new(Mutex::new(Vec::new()));
    // Until 4 s after the server is back (a restart on a loaded machine takes seconds, and a
    // takeover waits out a lease), bounded by 30 s in all.
    let until = Arc::new(Mutex::new(Instant::now() + Duration::from_secs(30)));
    let contenders = tokio::spawn(contend(locks, Arc::clone(&until), Arc::clone(&holds)));
    tokio::time::sleep(Duration::from_secs(1)).await;
    let server = tokio::task::spawn_blocking(move || {
        server.kill();
        std::thread::sleep(Duration::from_millis(500));
        server.start_again().expect("start again on its data");
        server
    })
    .await
    .expect("restart");
    let restarted = Instant::now();
    *until.lock().unwrap_or_else(PoisonError::into_inner) = restarted + Duration::from_secs(4);
    contenders.await.expect("contenders");
    let mut holds = holds.lock().unwrap_or_else(PoisonError::into_inner).clone();
    holds.sort_by_key(|h| h.from);
    assert!(holds.len() >= 4, "too few grants to tell: {holds:?}");
    assert!(
        holds.iter().any(|h| h.from >= restarted),
        "no grant once the server was back: {holds:?}"
    );
    for pair in holds.windows(2) {
        assert!(
            pair[0].to <= pair[1].from,
            "two holders at once: {:?} and {:?}",
            pair[0],
            pair[1]
        );
        assert!(
            pair[0].token < pair[1].token,
            "fencing tokens went back: {pair:?}"
        );
    }
    drop(server);
}

/// A holder paused past its lease (a GC pause, a stopped VM): its late fenced write to the
/// protected object is refused once the next holder wrote. Run by `errors::on_one_s3_server`.
pub(crate) async fn paused_holder_is_fenced(server: &SeaweedfsServer) {
    let (paused, other) = (
        Locker::new(common::lock_on(server, "paused")),
        common::lock_on(server, "paused"),
    );
    let store = Arc::clone(other.store());
    let resource = other.object_path("resource-data");
    let old = paused.lock("job").fixed_ttl(LEASE).await.expect("free");
    let old_token = old.fencing_token();
    // The holder stops (a GC pause, a stopped VM) past its lease; another takes over.
    let new = Locker::new(other)
        .lock("job")
        .fixed_ttl(Duration::from_secs(5))
        .wait(Duration::from_secs(10))
        .await
        .expect("taken over after the lease");
    assert!(new.fencing_token() > old_token);
    fenced_put(
        store.as_ref(),
        &new.fence().for_resource(resource.as_ref()),
        b"new".to_vec().into(),
        common::TIMEOUT,
    )
    .await
    .expect("the new holder writes");
    let late = fenced_put(
        store.as_ref(),
        &Fence::new(resource.as_ref(), old_token),
        b"late".to_vec().into(),
        common::TIMEOUT,
    )
    .await;
    assert!(
        matches!(late, Err(LockError::Fenced { token, .. }) if token == old_token),
        "the paused holder's late write must be refused: {late:?}"
    );
    new.release().await.expect("ours");
}
