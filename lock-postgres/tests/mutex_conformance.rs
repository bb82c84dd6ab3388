//! The exclusive lock's behaviour suite (`lock_testkit::conformance::mutex`) over
//! `PostgresLock` on a fresh server (initdb in a temp dir): every check of the contract, with
//! release announcements (LISTEN/NOTIFY) and strict per-name fencing tokens; and over
//! `PostgresAdvisoryLock`, which declares no fencing tokens and no announcements.
//!
//! One test per check, so a failure names it.

mod common;

use lock_core::Locker;
use lock_postgres::PostgresLock;
use lock_testkit::PostgresServer;
use lock_testkit::conformance::Backend;

/// Lockers on `server`, each with a `PostgresLock` of its own (its own pool and listening
/// connection, like another process); the lease table is created first.
async fn postgres(server: &PostgresServer) -> Backend {
    common::lock(server).await; // migrates
    let url = server.url();
    Backend::new(move || {
        Locker::new(
            PostgresLock::builder()
                .url(url.as_str())
                .build()
                .expect("valid URL"),
        )
    })
}

lock_testkit::mutex_conformance_tests!(
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    {
        let server = common::server();
        let backend = crate::postgres(&server).await;
        (server, backend)
    }
);

/// The same contract over `PostgresAdvisoryLock` (session advisory locks), with what that mode
/// keeps less of declared once: no fencing tokens, no release announcements (waiters poll).
mod advisory {
    use lock_core::Locker;
    use lock_testkit::PostgresServer;
    use lock_testkit::conformance::{Backend, Fencing};

    fn advisory(server: &PostgresServer) -> Backend {
        let url = server.url();
        let mut backend = Backend::new(move || {
            Locker::new(
                lock_postgres::PostgresAdvisoryLock::builder()
                    .url(url.as_str())
                    .build()
                    .expect("valid URL"),
            )
        });
        backend.fencing = Fencing::None;
        backend.announces_releases = false;
        backend
    }

    lock_testkit::mutex_conformance_tests!(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        {
            let server = crate::common::server();
            let backend = advisory(&server);
            (server, backend)
        }
    );

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn multi_lock_all_or_nothing() {
        let server = crate::common::server();
        lock_testkit::conformance::multi::all_or_nothing(&advisory(&server), "advisory:multi")
            .await;
    }
}
