//! A wrong password is refused with an error that says retrying will not help.

use crate::common;

use std::time::Duration;

use lock_core::backend::Lock;
use lock_core::{LockError, Token};
use lock_postgres::PostgresLock;
use lock_testkit::PostgresServer;

#[tokio::test]
async fn a_wrong_password_is_a_non_retryable_backend_error() {
    let server = PostgresServer::builder()
        .password("right")
        .start()
        .expect("start postgres");
    let right = common::lock(&server).await;
    right.ping().await.expect("the right password works");

    let wrong = PostgresLock::builder()
        .url(server.url_with_password("wrong"))
        .build()
        .expect("build");
    let err = wrong
        .try_acquire(
            "job",
            Token::generate().expect("token"),
            Duration::from_secs(5),
        )
        .await
        .expect_err("refused");
    assert!(
        matches!(
            err,
            LockError::Backend {
                retryable: false,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("password"), "{err}");
    let err = wrong.ping().await.expect_err("refused");
    assert!(!err.is_retryable(), "{err}");
}
