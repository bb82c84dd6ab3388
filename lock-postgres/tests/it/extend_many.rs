//! The watchdog's batch: `extend_many` extends every lease still ours in one statement and
//! answers "not ours" for the others, each lease on its own.

use crate::common;

use std::time::Duration;

use lock_core::Token;
use lock_core::backend::{Attempt, Lock};

#[tokio::test]
async fn one_statement_extends_the_leases_still_ours_and_no_other() {
    let server = common::server();
    let lock = common::lock(&server).await;
    // Long enough for 50 grants and the batch on a loaded machine (300 ms was not: lease 0
    // had run out before the batch reached it).
    let short = Duration::from_secs(3);
    let first_grant = tokio::time::Instant::now();
    let mut leases = Vec::new();
    for i in 0..50 {
        let token = Token::generate().expect("token");
        let Attempt::Acquired(lease) = lock
            .try_acquire(&format!("batch:{i}"), token, short)
            .await
            .expect("answers")
        else {
            panic!("batch:{i} is free");
        };
        leases.push(lease);
    }
    // One lease released: no longer ours, so the batch must not extend it.
    assert!(lock.release(&leases[10]).await.expect("answers"));
    tokio::time::sleep(Duration::from_millis(50)).await;
    let requests: Vec<_> = leases
        .iter()
        .map(|lease| (lease.clone(), Duration::from_secs(5)))
        .collect();
    let answers = lock.extend_many(&requests).await;
    assert_eq!(answers.len(), 50);
    for (i, answer) in answers.iter().enumerate() {
        let extended = answer.as_ref().expect("no error");
        assert_eq!(extended.is_some(), i != 10, "lease {i}: {extended:?}");
    }
    // Past the first TTL, the extended leases still hold: a new token is refused on each.
    tokio::time::sleep_until(first_grant + short + Duration::from_millis(100)).await;
    for i in [0, 25, 49] {
        let other = lock
            .try_acquire(
                &format!("batch:{i}"),
                Token::generate().expect("token"),
                short,
            )
            .await
            .expect("answers");
        assert!(
            matches!(other, Attempt::Busy { .. }),
            "batch:{i} was extended"
        );
    }
    // An empty batch and an out-of-range TTL answer per lease.
    assert!(lock.extend_many(&[]).await.is_empty());
    let bad = lock
        .extend_many(&[(leases[0].clone(), Duration::ZERO)])
        .await;
    assert!(matches!(
        bad[0],
        Err(lock_core::LockError::InvalidInput { .. })
    ));
}
