//! The advisory mode and sqlx's `PgAdvisoryLock` on the same names: the same keys, and each
//! excludes the other.

use crate::common::{self, token};

use std::time::Duration;

use lock_core::backend::{Attempt, Lock};
use lock_postgres::advisory_key;
use sqlx::Connection;
use sqlx::Either;
use sqlx::postgres::{PgAdvisoryLock, PgConnection};

#[test]
fn names_map_to_the_keys_sqlx_computes() {
    let mut names: Vec<String> = [
        "",
        "order:42",
        "my first Postgres advisory lock!",
        "ünïcødé ключ 鍵",
        "a name with spaces and a \0 nul",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    names.extend((0..200).map(|i| format!("job-{i}")));
    names.push("x".repeat(10_000));
    for name in &names {
        let sqlx_key = PgAdvisoryLock::new(name).key().as_bigint();
        assert_eq!(Some(advisory_key(name)), sqlx_key, "name {name:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sqlx_lock_and_a_distlock_lease_exclude_each_other() {
    let server = common::server();
    let lock = common::advisory(&server);
    let ttl = Duration::from_secs(30);
    let mut conn = PgConnection::connect(&server.url())
        .await
        .expect("sqlx connects");

    // sqlx holds "order:42": distlock is busy on it, free on another name.
    let sqlx_lock = PgAdvisoryLock::new("order:42");
    let Either::Left(sqlx_guard) = sqlx_lock.try_acquire(&mut conn).await.expect("sqlx try") else {
        panic!("sqlx could not take a free lock");
    };
    assert_eq!(
        lock.try_acquire("order:42", token(), ttl)
            .await
            .expect("try"),
        Attempt::Busy {
            holder_ttl: None,
            announces: false
        },
        "distlock took a name sqlx holds"
    );
    let Attempt::Acquired(other) = lock
        .try_acquire("order:43", token(), ttl)
        .await
        .expect("try")
    else {
        panic!("another name is busy");
    };
    assert!(lock.release(&other).await.expect("release"));

    // sqlx releases: distlock takes it, and now sqlx is refused.
    let conn = sqlx_guard.release_now().await.expect("sqlx releases");
    let Attempt::Acquired(lease) = lock
        .try_acquire("order:42", token(), ttl)
        .await
        .expect("try")
    else {
        panic!("still busy after sqlx released");
    };
    assert_eq!(
        lease.fencing_token(),
        0,
        "advisory leases carry no fencing token"
    );
    let conn = match sqlx_lock.try_acquire(conn).await.expect("sqlx try") {
        Either::Left(_) => panic!("sqlx took a name distlock holds"),
        Either::Right(conn) => conn,
    };

    // distlock releases (its boolean was true): sqlx gets it.
    assert!(
        lock.release(&lease).await.expect("release"),
        "unlock said false"
    );
    assert!(
        matches!(
            sqlx_lock.try_acquire(conn).await.expect("sqlx try"),
            Either::Left(_)
        ),
        "sqlx is still refused after distlock released"
    );
}
