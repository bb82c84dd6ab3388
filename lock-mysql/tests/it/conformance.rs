//! The conformance suite (`lock_testkit::conformance`) over MariaDB: every check of every
//! module, one test per module, over `MysqlLock` (the lease table: `table::mutex`) and
//! `MysqlAdvisoryLock` (`advisory::...`). What runs comes from each lock's capability table:
//! every kind for the lease table (the multi-lock in one transaction, strict fencing tokens,
//! no announcements), the mutex and the multi-lock one name after the other for the advisory
//! mode, whose other kinds are checked to be refused before any statement.
//!
//! The checks running at the same time share one throwaway server (`common::shared`), each on
//! names of its own.

/// Lockers each with a `MysqlLock` of its own (its own pool, like another process).
mod table {
    use std::sync::Arc;

    use lock_core::{Fence, Locker};
    use lock_mysql::sqlx::{self, Connection as _, MySqlConnection};
    use lock_testkit::conformance::{Backend, GuardedWrites};

    async fn setup() -> (Arc<crate::common::Db>, Backend) {
        let db = crate::common::shared().await;
        let url = db.server.url();
        let late = crate::common::through(&db.server, &url);
        let writes = guarded_writes(&url);
        let wrong = db.server.url_with_password("not-the-password");
        let backend = Backend::new(move || Locker::new(crate::common::lock(&url)))
            .with_late_answers_through(db.server.addr(), move |at| {
                Locker::new(crate::common::lock(&late(at)))
            })
            .with_guarded_writes(writes)
            .with_wrong_credentials(move || Locker::new(crate::common::lock(&wrong)));
        (db, backend)
    }

    /// The suite's guarded writes: `CALL distlock_fence` first, then an upsert of
    /// `guarded_register`, in one transaction (rolled back when refused).
    fn guarded_writes(url: &str) -> GuardedWrites {
        let (url, reads) = (url.to_owned(), url.to_owned());
        GuardedWrites::new(
            move |fence: Fence, value: String| {
                let url = url.clone();
                async move {
                    let mut conn = MySqlConnection::connect(&url).await.expect("connect");
                    sqlx::query(
                        "CREATE TABLE IF NOT EXISTS guarded_register \
                         (resource VARBINARY(1024) PRIMARY KEY, value TEXT NOT NULL)",
                    )
                    .execute(&mut conn)
                    .await
                    .expect("the guarded checks' table");
                    let mut tx = conn.begin().await.expect("begin");
                    lock_mysql::fence(&mut tx, &fence).await?;
                    sqlx::query(
                        "INSERT INTO guarded_register (resource, value) VALUES (?, ?) \
                         ON DUPLICATE KEY UPDATE value = VALUES(value)",
                    )
                    .bind(fence.resource.as_bytes())
                    .bind(&value)
                    .execute(&mut *tx)
                    .await
                    .expect("write");
                    tx.commit().await.expect("commit");
                    Ok(())
                }
            },
            move |resource: String| {
                let url = reads.clone();
                async move {
                    let mut conn = MySqlConnection::connect(&url).await.expect("connect");
                    sqlx::query_scalar("SELECT value FROM guarded_register WHERE resource = ?")
                        .bind(resource.as_bytes())
                        .fetch_optional(&mut conn)
                        .await
                        .expect("read")
                }
            },
        )
    }

    lock_testkit::conformance_tests!(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        setup().await
    );
}

/// Lockers each with a `MysqlAdvisoryLock` of their own (`GET_LOCK` session locks): no
/// fencing tokens, no release announcements, as its capability table declares.
mod advisory {
    use std::sync::Arc;

    use lock_core::Locker;
    use lock_testkit::conformance::{Backend, Fencing};

    async fn setup() -> (Arc<crate::common::Db>, Backend) {
        let db = crate::common::shared().await;
        let url = db.server.url();
        let late = crate::common::through(&db.server, &url);
        let backend = Backend::new(move || Locker::new(crate::common::advisory(&url)))
            .with_late_answers_through(db.server.addr(), move |at| {
                Locker::new(crate::common::advisory(&late(at)))
            });
        (db, backend)
    }

    lock_testkit::conformance_tests!(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        setup().await
    );

    /// What the suite's fencing and wake-up checks assert over this mode comes from its table.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn declares_no_fencing_and_no_announcements() {
        let (_db, backend) = setup().await;
        assert_eq!(backend.fencing(), Fencing::None);
        assert!(!backend.announces_releases());
    }
}
