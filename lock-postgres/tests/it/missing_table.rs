//! Before the migration, lock operations fail with an error that says to run it.

use crate::common;

use std::error::Error as _;
use std::time::Duration;

use lock_core::backend::{Attempt, Lock};
use lock_core::{LockError, Token};
use lock_postgres::MissingTable;

#[tokio::test]
async fn a_missing_table_says_to_run_the_migration() {
    let server = common::server();
    let lock = common::unmigrated(&server);
    let err = lock
        .try_acquire(
            "job",
            Token::generate().expect("token"),
            Duration::from_secs(5),
        )
        .await
        .expect_err("no table");
    let LockError::Backend {
        retryable: false,
        ref source,
        ..
    } = err
    else {
        panic!("{err}");
    };
    assert!(source.downcast_ref::<MissingTable>().is_some(), "{source}");
    assert!(err.to_string().contains("migrate()"), "{err}");
    assert!(err.source().is_some());

    lock.migrate().await.expect("migrate");
    lock.migrate().await.expect("the migration is idempotent");
    assert!(matches!(
        lock.try_acquire(
            "job",
            Token::generate().expect("token"),
            Duration::from_secs(5)
        )
        .await
        .expect("after the migration"),
        Attempt::Acquired(_)
    ));
}
