//! Lock kinds on PostgreSQL: the multi-lock works (one name after the other, all or nothing,
//! through the behaviour suite), and the kinds the lease table has no layout for are refused
//! with a typed error.

mod common;

use lock_core::{LockError, Locker};
use lock_testkit::conformance::{self, Backend};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_multi_lock_works_and_the_other_kinds_are_unsupported() {
    let server = common::server();
    let lock = std::sync::Arc::new(common::lock(&server).await);
    let locker = Locker::from_arc(lock.clone());
    for (kind, answer) in [
        ("read", locker.read("doc").try_acquire().await.map(drop)),
        ("write", locker.write("doc").try_acquire().await.map(drop)),
        (
            "semaphore",
            locker.semaphore("doc", 2).try_acquire().await.map(drop),
        ),
        ("fair", locker.fair("doc").try_acquire().await.map(drop)),
    ] {
        assert!(
            matches!(answer, Err(LockError::Unsupported { backend: "postgres", kind: said }) if said == kind),
            "{kind}: {answer:?}"
        );
    }
    let url = server.url();
    let backend = Backend::new(move || {
        Locker::new(
            lock_postgres::PostgresLock::builder()
                .url(url.as_str())
                .build()
                .expect("url"),
        )
    });
    conformance::multi::all_or_nothing(&backend, "pg1").await;
    conformance::multi::no_deadlock_or_overlap(&backend, "pg2").await;
    conformance::multi::cancelled_acquire_leaves_nothing(&backend, "pg3").await;
}
