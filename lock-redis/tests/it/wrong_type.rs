//! A key of the wrong type under the lock name gives a typed error and is never overwritten.

use lock_core::backend::Lock;
use lock_core::{Lease, LockError, Locker, Token};
use tokio::time::Instant;

use crate::common::{lock_on, raw, server};

#[tokio::test]
async fn a_hash_under_the_name_is_reported_and_kept() {
    let server = server();
    let locker = Locker::new(lock_on(&server));
    let mut conn = raw(&server).await;
    redis::cmd("HSET")
        .arg("orders")
        .arg("42")
        .arg("paid")
        .query_async::<()>(&mut conn)
        .await
        .expect("HSET");

    let err = locker
        .lock("orders")
        .wait(std::time::Duration::from_secs(5))
        .await
        .expect_err("wrong type");
    assert!(
        matches!(err, LockError::WrongType { ref key, .. } if key == "orders"),
        "{err:?}"
    );
    assert!(!err.is_retryable());
    let err = locker
        .lock("orders")
        .try_acquire()
        .await
        .expect_err("wrong type");
    assert!(matches!(err, LockError::WrongType { .. }), "{err:?}");

    // Release and extend of a lease on that name touch nothing either.
    let lock = lock_on(&server);
    let lease = Lease::new("orders", Token::generate().expect("rng"), 1, Instant::now());
    assert!(matches!(
        lock.release(&lease).await,
        Err(LockError::WrongType { .. })
    ));
    assert!(matches!(
        lock.extend(&lease, std::time::Duration::from_secs(1)).await,
        Err(LockError::WrongType { .. })
    ));

    let kept: Option<String> = redis::cmd("HGET")
        .arg("orders")
        .arg("42")
        .query_async(&mut conn)
        .await
        .expect("HGET");
    assert_eq!(kept.as_deref(), Some("paid"), "the hash is intact");
}

#[tokio::test]
async fn a_clobbered_fencing_counter_undoes_the_grant() {
    let server = server();
    let lock = lock_on(&server);
    let fence = lock.fence_key("job");
    let locker = Locker::new(lock);
    let mut conn = raw(&server).await;
    redis::cmd("LPUSH")
        .arg(&fence)
        .arg("x")
        .query_async::<()>(&mut conn)
        .await
        .expect("LPUSH");

    let err = locker
        .lock("job")
        .try_acquire()
        .await
        .expect_err("the counter has the wrong type");
    assert!(matches!(err, LockError::WrongType { .. }), "{err:?}");
    let exists: i64 = redis::cmd("EXISTS")
        .arg("job")
        .query_async(&mut conn)
        .await
        .expect("EXISTS");
    assert_eq!(
        exists, 0,
        "no lock is left without a fencing token handed out"
    );
    let len: i64 = redis::cmd("LLEN")
        .arg(&fence)
        .query_async(&mut conn)
        .await
        .expect("LLEN");
    assert_eq!(len, 1, "the list is intact");
}
