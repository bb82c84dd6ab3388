//! "Held since" (schema version 5's `granted_at`): each grant is dated by its own statement,
//! the mutex's by the lease table's trigger on a new fencing token (so a renewal keeps the
//! date, a hand-over or a new grant moves it); a version 4 database shows no date and keeps
//! working, and the migration over it dates the grants made from then on.

use std::time::{Duration, SystemTime};

use lock_core::backend::{Attempt, Handover, HeldKind, Inspect, Lock};
use lock_core::{Lease, Token};
use lock_postgres::PostgresLock;

use crate::common;

const TTL: Duration = Duration::from_secs(30);

async fn take(lock: &PostgresLock, name: &str) -> Lease {
    match lock
        .try_acquire(name, common::token(), TTL)
        .await
        .expect("acquire")
    {
        Attempt::Acquired(lease) => lease,
        other => panic!("{name} is busy: {other:?}"),
    }
}

/// The "held since" of `name`'s mutex holder.
async fn since(lock: &PostgresLock, name: &str) -> Option<SystemTime> {
    let held = lock.inspect(name).await.expect("inspect");
    let mutex = held
        .iter()
        .find(|h| h.kind == HeldKind::Mutex)
        .unwrap_or_else(|| panic!("{name} is not held: {held:#?}"));
    mutex.holders[0].since
}

#[tokio::test]
async fn a_grant_is_dated_by_itself_and_a_renewal_keeps_its_date() {
    let server = common::server();
    let lock = common::lock(&server).await;
    let before = SystemTime::now() - Duration::from_secs(1);
    let lease = take(&lock, "dated").await;
    let granted = since(&lock, "dated").await.expect("dated");
    assert!(granted >= before && granted <= SystemTime::now() + Duration::from_secs(1));

    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(lock.extend(&lease, TTL).await.expect("extend").is_some());
    assert_eq!(since(&lock, "dated").await, Some(granted), "a renewal");

    let to = Token::generate().expect("token");
    let Handover::Handed(handed) = lock.hand_over(&lease, to, TTL).await.expect("hand over") else {
        panic!("ours");
    };
    let handed_at = since(&lock, "dated").await.expect("dated");
    assert!(handed_at > granted, "a hand-over is a new grant");
    assert!(lock.release(&handed).await.expect("release"));
}

#[tokio::test]
async fn a_version_4_database_shows_no_date_until_migrated() {
    let server = common::server();
    let lock = common::lock(&server).await;
    let client = common::client(&server.url()).await;
    client
        .batch_execute(
            "DROP TRIGGER distlock_leases_granted ON distlock_leases;
             DROP FUNCTION distlock_lease_granted();
             ALTER TABLE distlock_leases DROP COLUMN granted_at;
             ALTER TABLE distlock_rw DROP COLUMN granted_at;
             ALTER TABLE distlock_rw_readers DROP COLUMN granted_at;
             ALTER TABLE distlock_permits DROP COLUMN granted_at;
             UPDATE distlock_schema SET version = 4;",
        )
        .await
        .expect("back to version 4");
    // The mutex keeps working, undated; a lease held across the migration stays held.
    let old = take(&lock, "old").await;
    assert_eq!(since(&lock, "old").await, None);
    lock.migrate().await.expect("migrate");
    assert_eq!(
        since(&lock, "old").await,
        None,
        "granted before the upgrade"
    );
    let new = take(&lock, "new").await;
    assert!(since(&lock, "new").await.is_some());
    assert!(lock.release(&old).await.expect("still ours"));
    assert!(lock.release(&new).await.expect("ours"));
}
