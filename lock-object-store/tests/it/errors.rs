//! Typed errors a user can act on: an object at the name that is not a lock (left as it was),
//! a missing bucket, wrong credentials, a store that is down; and the self-probe refusing a
//! store that ignores conditional writes.

use std::time::{Duration, Instant};

use lock_core::backend::Lock;
use lock_core::{LockError, Token};
use lock_object_store::object_store::ObjectStoreExt as _;
use lock_object_store::{ObjectStoreError, ObjectStoreLock};
use lock_testkit::{FakeS3, free_port};

use crate::common;

const TTL: Duration = Duration::from_secs(1);

fn token() -> Token {
    Token::generate().expect("rng")
}

/// The `ObjectStoreError` behind a `LockError::Backend`, if any.
fn source_of(error: &LockError) -> Option<&ObjectStoreError> {
    match error {
        LockError::Backend { source, .. } => source.downcast_ref::<ObjectStoreError>(),
        _ => None,
    }
}

/// The checks on one SeaweedFS server (each test process starts its own: one test for all
/// of them), the server killed and restarted last. SeaweedFS makes a missing bucket on the first write, so "bucket missing" cannot
/// be shown on it (the unit tests map S3's 404 on a write).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_one_s3_server() {
    let server = common::shared();
    not_a_lock_body(&common::lock_on(&server, "errors")).await;
    crate::faults::paused_holder_is_fenced(&server).await;

    let wrong = ObjectStoreLock::builder()
        .url(server.url("errors"))
        .endpoint(server.endpoint())
        .credentials(lock_testkit::SEAWEEDFS_ACCESS_KEY, "not-the-secret")
        .region("us-east-1")
        .build()
        .expect("valid configuration");
    let error = wrong
        .try_acquire("job", token(), TTL)
        .await
        .expect_err("refused");
    assert!(!error.is_retryable(), "{error}");
    assert!(
        matches!(
            source_of(&error),
            Some(ObjectStoreError::Credentials { .. })
        ),
        "wrong credentials are said so: {error:?}"
    );
    drop(wrong);
    // Last, as it kills the server: this process's test holds the only reference.
    let server = std::sync::Arc::try_unwrap(server).expect("the server is this test's alone");
    crate::faults::killed_and_restarted_server_gives_no_overlap(server).await;
}

/// An object at the lock's name that is not a lock body: `WrongType`, nothing overwritten.
async fn not_a_lock_body(lock: &ObjectStoreLock) {
    let path = lock.object_path("foreign");
    lock.store()
        .put(&path, b"someone else's data".to_vec().into())
        .await
        .expect("put");
    let answer = lock.try_acquire("foreign", token(), TTL).await;
    assert!(
        matches!(answer, Err(LockError::WrongType { .. })),
        "a foreign object is the wrong type: {answer:?}"
    );
    let kept = lock.store().get(&path).await.expect("get").bytes().await;
    assert_eq!(
        kept.expect("bytes").as_ref(),
        b"someone else's data",
        "the foreign object was overwritten"
    );
}

/// Nothing listens on the endpoint: a retryable error within the request bound.
#[tokio::test]
async fn a_store_that_is_down_is_a_retryable_error() {
    let endpoint = format!("http://127.0.0.1:{}", free_port());
    let lock = common::lock_at(&endpoint, "s3://distlock/locks");
    let started = Instant::now();
    let error = lock
        .try_acquire("job", token(), TTL)
        .await
        .expect_err("down");
    assert!(error.is_retryable(), "{error:?}");
    assert!(
        started.elapsed() < common::TIMEOUT * 3,
        "answered after {:?}",
        started.elapsed()
    );
}

/// A store that accepts conditional writes and ignores them is refused by the self-probe:
/// `Unsupported`, naming the store, and never a grant.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_probe_refuses_a_store_that_ignores_conditions() {
    let fake = FakeS3::start().await.expect("fake S3");
    let lock = common::lock_at(&fake.endpoint(), "s3://bucket/locks");
    for _ in 0..2 {
        let answer = lock.try_acquire("job", token(), TTL).await;
        match answer {
            Err(LockError::Unsupported { backend, .. }) => assert!(
                backend.contains("bucket") && backend.contains("ignored"),
                "the refusal names the store and what it ignored: {backend}"
            ),
            other => panic!("a store that ignores If-None-Match was used: {other:?}"),
        }
    }
    assert!(matches!(
        lock.check_store().await,
        Err(LockError::Unsupported { .. })
    ));
}
