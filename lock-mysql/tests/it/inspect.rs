//! The inspector beyond the conformance suite: "held since" on a database migrated by an
//! earlier version (schema version 2, without `granted_at`), which the migration upgrades.

use std::time::{Duration, SystemTime};

use lock_core::backend::{Attempt, HeldKind, Lock};
use lock_mysql::MissingTable;

use crate::common::token;

/// The holders' tables as schema version 2 created them.
const VERSION_2: &str = "CREATE DATABASE schema_v2; USE schema_v2;
CREATE TABLE distlock_leases (name VARBINARY(1024) NOT NULL PRIMARY KEY,
    token CHAR(32) CHARACTER SET ascii COLLATE ascii_bin NULL,
    fencing_token BIGINT NOT NULL, expires_at BIGINT NOT NULL) ENGINE = InnoDB;
CREATE TABLE distlock_rw (name VARBINARY(1024) NOT NULL PRIMARY KEY,
    writer CHAR(32) CHARACTER SET ascii COLLATE ascii_bin NULL,
    fencing_token BIGINT NOT NULL, expires_at BIGINT NOT NULL) ENGINE = InnoDB;
CREATE TABLE distlock_rw_readers (name VARBINARY(1024) NOT NULL,
    token CHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    expires_at BIGINT NOT NULL, PRIMARY KEY (name, token)) ENGINE = InnoDB;
CREATE TABLE distlock_permits (name VARBINARY(1024) NOT NULL,
    token CHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL, permits INT NOT NULL,
    expires_at BIGINT NOT NULL, PRIMARY KEY (name, token)) ENGINE = InnoDB;";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_2_schema_is_upgraded_and_shows_since_when_a_lock_is_held() {
    let db = crate::common::shared().await;
    db.server
        .sql_as_root(VERSION_2)
        .expect("a version 2 schema");
    let url = format!(
        "{}/schema_v2",
        db.server.url().rsplit_once('/').expect("path").0
    );
    let lock = crate::common::lock(&url);
    let error = lock
        .try_acquire("upgraded", token(), Duration::from_secs(5))
        .await
        .expect_err("granted_at is missing");
    let missing = std::error::Error::source(&error)
        .and_then(|source| source.downcast_ref::<MissingTable>())
        .is_some();
    assert!(missing, "{error:?}");
    assert!(error.to_string().contains("migrate"), "{error}");

    lock.migrate().await.expect("upgrade");
    lock.migrate().await.expect("again: nothing left to do");
    let columns = db
        .server
        .sql_as_root(
            "SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'schema_v2' \
             AND COLUMN_NAME = 'granted_at'",
        )
        .expect("columns");
    assert_eq!(columns.trim(), "4", "every holders' table has granted_at");

    let before = SystemTime::now();
    let Attempt::Acquired(lease) = lock
        .try_acquire("upgraded", token(), Duration::from_secs(30))
        .await
        .expect("acquire")
    else {
        panic!("free after the upgrade");
    };
    let after = SystemTime::now();
    let inspector = lock.inspector().expect("an inspector");
    let held = inspector.inspect("upgraded").await.expect("inspect");
    let [held] = held.as_slice() else {
        panic!("one hold: {held:#?}");
    };
    assert_eq!(held.kind, HeldKind::Mutex);
    let holder = held.first_holder().expect("its holder");
    assert_eq!(holder.token, lease.token().to_hex().as_str());
    let since = holder.since.expect("held since");
    let slack = Duration::from_secs(2);
    assert!(
        since + slack >= before && since <= after + slack,
        "{since:?}"
    );
    assert!(lock.release(&lease).await.expect("release"));
}
