//! Shared by the integration tests: one throwaway server for every test that does not stop it
//! (started by the first, stopped by its PID when the last ends), migrated once; locks on it.

#![allow(dead_code, unreachable_pub)]

use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use lock_core::Token;
use lock_mysql::{MysqlAdvisoryLock, MysqlLock};
use lock_testkit::MariadbServer;
use tokio::sync::OnceCell;

/// A fresh random token.
pub fn token() -> Token {
    Token::generate().expect("token")
}

/// The shared server, and whether its lease table was created.
pub struct Db {
    pub server: MariadbServer,
    migrated: OnceCell<()>,
}

/// The server of the tests running now, or a new one, with the lease table created.
pub async fn shared() -> Arc<Db> {
    let db = {
        static DB: Mutex<Weak<Db>> = Mutex::new(Weak::new());
        let mut shared = DB.lock().unwrap_or_else(PoisonError::into_inner);
        match shared.upgrade() {
            Some(db) => db,
            None => {
                let db = Arc::new(Db {
                    // `metadata_lock_info`: where MariaDB tells who holds a `GET_LOCK` lock
                    // (the inspectors' listing of the advisory mode's locks).
                    server: MariadbServer::builder()
                        .setting("plugin-load-add", "metadata_lock_info")
                        .start()
                        .expect("start mariadb"),
                    migrated: OnceCell::new(),
                });
                *shared = Arc::downgrade(&db);
                db
            }
        }
    };
    db.migrated
        .get_or_init(|| async {
            lock(&db.server.url()).migrate().await.expect("migrate");
        })
        .await;
    db
}

/// A lease-table lock on `url` with short timeouts (no migration).
pub fn lock(url: &str) -> MysqlLock {
    MysqlLock::builder()
        .url(url)
        .connect_timeout(Duration::from_secs(2))
        .statement_timeout(Duration::from_secs(2))
        .build()
        .expect("build lock")
}

/// An advisory lock on `url` with short timeouts.
pub fn advisory(url: &str) -> MysqlAdvisoryLock {
    MysqlAdvisoryLock::builder()
        .url(url)
        .connect_timeout(Duration::from_secs(2))
        .statement_timeout(Duration::from_secs(2))
        .build()
        .expect("build lock")
}

/// `url` with `server`'s address replaced by another (a proxy's in front of it).
pub fn through(
    server: &MariadbServer,
    url: &str,
) -> impl Fn(std::net::SocketAddr) -> String + Send + Sync + 'static {
    let (url, server) = (url.to_owned(), server.addr().to_string());
    move |at| url.replace(&server, &at.to_string())
}
