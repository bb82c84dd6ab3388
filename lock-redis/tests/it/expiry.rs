//! A lease that is never released frees the lock when its TTL runs out.

use std::time::Duration;

use lock_core::LockError;

use crate::common::{locker_on, pttl, raw, server};

#[tokio::test]
async fn expiry_frees_the_lock() {
    let server = server();
    let locker = locker_on(&server);
    let mut conn = raw(&server).await;
    let crashed = locker
        .lock("job")
        .fixed_ttl(Duration::from_millis(1_000))
        .await
        .expect("free")
        .leak();
    let left = pttl(&mut conn, "job").await;
    assert!(
        (1..=1_000).contains(&left),
        "the key carries the TTL: {left} ms"
    );
    assert!(
        locker
            .lock("job")
            .try_acquire()
            .await
            .expect("ok")
            .is_none(),
        "held until it expires"
    );
    // A waiter gets it once the TTL has run out, without anyone releasing.
    let next = locker
        .lock("job")
        .wait(Duration::from_secs(5))
        .await
        .expect("free after expiry");
    assert!(next.fencing_token() > crashed.fencing_token());
    assert!(
        matches!(
            locker.release(&crashed).await,
            Err(LockError::NotOwned { .. })
        ),
        "the crashed holder's lease is gone"
    );
    next.release().await.expect("ok");
}
