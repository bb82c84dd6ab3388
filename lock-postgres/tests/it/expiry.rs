//! A holder that crashed (never released) loses its lease at its TTL, by the server's clock,
//! and the next grant's fencing token is greater.

use crate::common::{self, token};

use std::time::Duration;

use lock_core::backend::{Attempt, Lock};

const SHORT: Duration = Duration::from_millis(400);

#[tokio::test]
async fn a_crashed_holders_lease_frees_at_its_ttl() {
    let server = common::server();
    let lock = common::lock(&server).await;
    let Attempt::Acquired(crashed) = lock
        .try_acquire("job", token(), SHORT)
        .await
        .expect("acquire")
    else {
        panic!("busy");
    };
    // Not released: the holder "crashed". Wait for the lease to end, by the busy answers'
    // holder TTL (bounded in count: the TTL is short).
    let mut next = None;
    for _ in 0..50 {
        match lock
            .try_acquire("job", token(), SHORT * 10)
            .await
            .expect("try")
        {
            Attempt::Acquired(lease) => {
                next = Some(lease);
                break;
            }
            Attempt::Busy { holder_ttl, .. } => {
                let left = holder_ttl.expect("a lease always has a TTL");
                assert!(left <= SHORT, "holder TTL {left:?} beyond the lease");
                tokio::time::sleep(left + Duration::from_millis(5)).await;
            }
        }
    }
    let next = next.expect("the crashed holder's lease never ended");
    assert!(next.fencing_token() > crashed.fencing_token());
    // The crashed holder, back, can neither extend nor release the new holder's lease.
    assert_eq!(lock.extend(&crashed, SHORT).await.expect("extend"), None);
    assert!(!lock.release(&crashed).await.expect("release"));
    assert!(lock.release(&next).await.expect("the new holder's"));
}
