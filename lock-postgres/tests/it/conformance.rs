//! The conformance suite (`lock_testkit::conformance`) over PostgreSQL: every check of every
//! module, one test per module, over `PostgresLock` (the lease table: `table::mutex`),
//! `PostgresAdvisoryLock` (`advisory::...`) and `PostgresLock` behind a real PgBouncer in
//! transaction mode with prepared statements off (`pgbouncer::...`). What runs comes from the
//! suite's one list and each lock's capability table: every kind for the lease table (the
//! multi-lock in one statement), the mutex and the multi-lock (one name after the other) for the
//! advisory mode, whose other kinds are checked to be refused before any statement; strict
//! fencing tokens and release announcements (LISTEN/NOTIFY) for the lease table, neither for the
//! advisory mode.
//!
//! The checks running at the same time share one throwaway server (`initdb` is slow), each on
//! names of its own; it is stopped by its PID when the last of them ends.

/// The shared server and the lease table on it.
mod db {
    use std::sync::{Arc, Mutex, PoisonError, Weak};
    use std::time::Duration;

    use lock_core::Fence;
    use lock_core::Locker;
    use lock_core::backend::Lock;
    use lock_postgres::PostgresLock;
    use lock_postgres::tokio_postgres::types::Type;
    use lock_postgres::tokio_postgres::{self, NoTls};
    use lock_testkit::PostgresServer;
    use lock_testkit::conformance::{Backend, GuardedWrites};
    use tokio::sync::OnceCell;

    /// A server, and whether its lease table was created.
    pub(super) struct Db {
        pub(super) server: PostgresServer,
        migrated: OnceCell<()>,
    }

    /// The server of the checks running now, or a new one, with the lease table created
    /// (once: concurrent `CREATE TABLE IF NOT EXISTS` can collide in PostgreSQL's catalog).
    pub(super) async fn shared() -> Arc<Db> {
        let db = {
            static DB: Mutex<Weak<Db>> = Mutex::new(Weak::new());
            let mut shared = DB.lock().unwrap_or_else(PoisonError::into_inner);
            match shared.upgrade() {
                Some(db) => db,
                None => {
                    let db = Arc::new(Db {
                        // Room for the lockers of the checks running at once (each has a
                        // pool and a listening connection), above the kit's default of 50.
                        server: PostgresServer::builder()
                            .setting("max_connections", "200")
                            .start()
                            .expect("start postgres"),
                        migrated: OnceCell::new(),
                    });
                    *shared = Arc::downgrade(&db);
                    db
                }
            }
        };
        db.migrated
            .get_or_init(|| async {
                PostgresLock::builder()
                    .url(db.server.url())
                    .connect_timeout(Duration::from_secs(5))
                    .build()
                    .expect("valid URL")
                    .migrate()
                    .await
                    .expect("migrate");
                let (client, connection) = tokio_postgres::connect(&db.server.url(), NoTls)
                    .await
                    .expect("connect");
                tokio::spawn(connection);
                client
                    .batch_execute(
                        "CREATE TABLE IF NOT EXISTS guarded_register \
                         (resource text PRIMARY KEY, value text NOT NULL)",
                    )
                    .await
                    .expect("the guarded checks' table");
            })
            .await;
        db
    }

    /// The suite's guarded writes through `url`: `distlock_fence` first, then an upsert of
    /// `guarded_register`, in one transaction (rolled back when refused), in unnamed
    /// statements (a transaction pooler keeps no prepared statement); read back at `reads`.
    pub(super) fn guarded_writes(url: String, reads: String) -> GuardedWrites {
        GuardedWrites::new(
            move |fence: Fence, value: String| {
                let url = url.clone();
                async move {
                    let (mut client, connection) =
                        tokio_postgres::connect(&url, NoTls).await.expect("connect");
                    tokio::spawn(connection);
                    let tx = client.transaction().await.expect("begin");
                    lock_postgres::fence(&tx, &fence).await?;
                    tx.query_typed(
                        "INSERT INTO guarded_register (resource, value) VALUES ($1, $2) \
                         ON CONFLICT (resource) DO UPDATE SET value = EXCLUDED.value",
                        &[(&fence.resource, Type::TEXT), (&value, Type::TEXT)],
                    )
                    .await
                    .expect("write");
                    tx.commit().await.expect("commit");
                    Ok(())
                }
            },
            move |resource: String| {
                let url = reads.clone();
                async move {
                    let (client, connection) =
                        tokio_postgres::connect(&url, NoTls).await.expect("connect");
                    tokio::spawn(connection);
                    client
                        .query_opt(
                            "SELECT value FROM guarded_register WHERE resource = $1",
                            &[&resource],
                        )
                        .await
                        .expect("read")
                        .map(|row| row.get(0))
                }
            },
        )
    }

    /// Lockers on the shared server, each with a lock of its own (its own pool, like another
    /// process) that `lock` makes from the server's URL; late answers through a proxy.
    pub(super) async fn lockers<L: Lock + 'static>(lock: fn(&str) -> L) -> (Arc<Db>, Backend) {
        let db = shared().await;
        let url = db.server.url();
        let late = url.clone();
        let server = db.server.addr();
        let backend = Backend::new(move || Locker::new(lock(url.as_str())))
            .with_late_answers_through(server, move |at| {
                Locker::new(lock(&late.replace(&server.to_string(), &at.to_string())))
            });
        (db, backend)
    }
}

/// Lockers each with a `PostgresLock` of its own (its own pool and listening connection, like
/// another process).
mod table {
    use std::sync::Arc;

    use lock_core::Locker;
    use lock_postgres::PostgresLock;
    use lock_testkit::conformance::Backend;

    async fn setup() -> (Arc<super::db::Db>, Backend) {
        let (db, backend) =
            super::db::lockers(|url| PostgresLock::builder().url(url).build().expect("valid URL"))
                .await;
        let writes = super::db::guarded_writes(db.server.url(), db.server.url());
        // A session whose search path finds no lease table: a database never migrated.
        let unmigrated = format!("{}?options=-csearch_path%3Dnowhere", db.server.url());
        let backend = backend
            .with_guarded_writes(writes)
            .with_unprepared(move || {
                Locker::new(
                    PostgresLock::builder()
                        .url(unmigrated.as_str())
                        .build()
                        .expect("valid URL"),
                )
            });
        (db, backend)
    }

    lock_testkit::conformance_tests!(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        setup().await
    );
}

/// Lockers each with a `PostgresAdvisoryLock` of their own (session advisory locks): no
/// fencing tokens, no release announcements, as its capability table declares.
mod advisory {
    use std::sync::Arc;

    use lock_postgres::PostgresAdvisoryLock;
    use lock_testkit::conformance::{Backend, Fencing};

    async fn setup() -> (Arc<super::db::Db>, Backend) {
        super::db::lockers(|url| {
            PostgresAdvisoryLock::builder()
                .url(url)
                .build()
                .expect("valid URL")
        })
        .await
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

/// The lease table behind a PgBouncer (`pool_mode = transaction`, 2 server connections) with
/// prepared statements off keeps the whole contract, its listener connecting to PostgreSQL
/// directly (`LISTEN` is session state, which a transaction pooler does not keep). One pooler
/// per check, in front of the shared server.
mod pgbouncer {
    use std::net::{Ipv4Addr, SocketAddr};
    use std::sync::Arc;

    use lock_core::Locker;
    use lock_postgres::PostgresLock;
    use lock_testkit::PgBouncer;
    use lock_testkit::conformance::Backend;

    async fn setup() -> ((PgBouncer, Arc<super::db::Db>), Backend) {
        let db = super::db::shared().await;
        let bouncer = PgBouncer::start(&db.server).expect("start pgbouncer");
        let (url, listen) = (bouncer.url(), db.server.url());
        let url_for_writes = url.clone();
        let lock = move |url: &str| {
            Locker::new(
                PostgresLock::builder()
                    .url(url)
                    .listen_url(listen.as_str())
                    .prepared_statements(false)
                    .build()
                    .expect("valid URL"),
            )
        };
        let pooler = SocketAddr::from((Ipv4Addr::LOCALHOST, bouncer.port()));
        let (direct, late) = (lock.clone(), url.clone());
        // Late answers through a proxy in front of the pooler.
        let backend = Backend::new(move || direct(url.as_str()))
            .with_late_answers_through(pooler, move |at| {
                lock(&late.replace(&pooler.to_string(), &at.to_string()))
            });
        // Guarded writes through the pooler too: the fence and the write in one transaction.
        let writes = super::db::guarded_writes(url_for_writes, db.server.url());
        let backend = backend.with_guarded_writes(writes);
        ((bouncer, db), backend)
    }

    lock_testkit::conformance_tests!(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        setup().await
    );
}
