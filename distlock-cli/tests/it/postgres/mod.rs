//! The command on PostgreSQL (`postgres://` URLs): lock-postgres's lease table, every kind,
//! and the server's advisory locks, on a throwaway server per test (lock-testkit), migrated
//! with `distlock migrate`.

mod inspect;
mod leader;
mod ls_many;
mod release;
mod run;
mod watch;

use std::time::Duration;

use lock_core::Locker;
use lock_postgres::PostgresLock;
use lock_postgres::tokio_postgres::{self, Client, NoTls};
use lock_testkit::PostgresServer;

use crate::common::{distlock, stderr};

/// A server with lock-postgres's schema, installed by `distlock migrate`.
pub(crate) fn server() -> PostgresServer {
    let server = PostgresServer::start().expect("postgres");
    let migrated = distlock(&[server.url()], &["migrate"]);
    assert!(migrated.status.success(), "{}", stderr(&migrated));
    server
}

/// lock-postgres's lock on `url`.
pub(crate) fn lock(url: &str) -> PostgresLock {
    PostgresLock::builder()
        .url(url)
        .connect_timeout(Duration::from_secs(3))
        .statement_timeout(Duration::from_secs(2))
        .build()
        .expect("lock")
}

/// A locker on `url`'s lease table (its own pool and listening connection: another process,
/// as far as the server can tell).
pub(crate) fn locker(url: &str) -> Locker {
    Locker::new(lock(url))
}

/// A session of its own on `url`, named `application` (`application_name`), and its backend
/// pid. The connection is driven in the background until the client is dropped.
pub(crate) async fn session(url: &str, application: &str) -> (Client, i32) {
    let mut config: tokio_postgres::Config = url.parse().expect("url");
    config.application_name(application);
    let (client, connection) = config.connect(NoTls).await.expect("connect");
    tokio::spawn(connection);
    let pid: i32 = client
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .expect("pid")
        .get(0);
    (client, pid)
}

/// The holder's token of `name` (the first lock `show --json` lists).
pub(crate) fn token_shown(url: &str, name: &str) -> String {
    let doc = crate::common::json(&distlock(&[url.to_owned()], &["--json", "show", name]));
    doc["locks"][0]["token"]
        .as_str()
        .unwrap_or_else(|| panic!("{name} is held with a token: {doc:#}"))
        .to_owned()
}
