//! A lease that expired and was re-taken can neither be released nor extended by its old
//! holder, and the new holder is left intact.

use std::time::Duration;

use lock_core::LockError;

use crate::common::{get, locker_on, pttl, raw, server, token_of};

#[tokio::test]
async fn a_stale_holder_cannot_touch_the_new_holder() {
    let server = server();
    let locker = locker_on(&server);
    let mut conn = raw(&server).await;

    let mut stale = locker
        .lock("res")
        .fixed_ttl(Duration::from_millis(100))
        .await
        .expect("free");
    tokio::time::sleep(Duration::from_millis(150)).await;
    let fresh = locker
        .lock("res")
        .fixed_ttl(Duration::from_secs(10))
        .await
        .expect("free after expiry");
    let fresh_token = token_of(&fresh);

    // Extend by the stale holder: refused, the new holder's TTL not touched.
    let err = stale
        .extend(Duration::from_secs(600))
        .await
        .expect_err("not ours");
    assert!(
        matches!(err, LockError::NotOwned { ref name } if name == "res"),
        "{err}"
    );
    assert!(
        pttl(&mut conn, "res").await <= 10_000,
        "the stale extend must not move the new TTL"
    );

    // Release by the stale holder: answers false and deletes nothing.
    assert!(
        matches!(stale.release().await, Err(LockError::NotOwned { .. })),
        "released a lease that was no longer ours"
    );
    assert_eq!(
        get(&mut conn, "res").await.as_deref(),
        Some(fresh_token.as_str())
    );

    // The new holder still extends and releases normally.
    let mut fresh = fresh;
    fresh.extend(Duration::from_secs(20)).await.expect("ours");
    assert!(pttl(&mut conn, "res").await > 10_000);
    fresh.release().await.expect("ok");
    assert_eq!(get(&mut conn, "res").await, None);
}
