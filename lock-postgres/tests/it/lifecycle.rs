//! Acquire, busy, extend, release and hand-over, one statement each, on a real server.

use crate::common::{self, token};

use std::time::Duration;

use lock_core::LockError;
use lock_core::backend::{Attempt, Handover, Lock};

const TTL: Duration = Duration::from_secs(10);

#[tokio::test]
async fn acquire_busy_extend_hand_over_release() {
    let server = common::server();
    let lock = common::lock(&server).await;
    lock.ping().await.expect("ping");
    assert_eq!(lock.backend(), "postgres");

    let Attempt::Acquired(first) = lock
        .try_acquire("job", token(), TTL)
        .await
        .expect("acquire")
    else {
        panic!("a free lock was busy");
    };
    assert!(first.fencing_token() > 0);
    assert_eq!(first.name(), "job");

    match lock
        .try_acquire("job", token(), TTL)
        .await
        .expect("second acquire")
    {
        Attempt::Busy {
            holder_ttl: Some(left),
            announces: true,
        } => assert!(left <= TTL && left > Duration::ZERO, "holder TTL {left:?}"),
        other => panic!("a held lock answered {other:?}"),
    }
    // Another name is independent.
    assert!(matches!(
        lock.try_acquire("other", token(), TTL)
            .await
            .expect("other"),
        Attempt::Acquired(_)
    ));

    assert!(
        lock.extend(&first, TTL * 2)
            .await
            .expect("extend")
            .is_some()
    );
    match lock
        .try_acquire("job", token(), TTL)
        .await
        .expect("busy again")
    {
        Attempt::Busy {
            holder_ttl: Some(left),
            ..
        } => assert!(left > TTL, "the extension did not show: {left:?}"),
        other => panic!("{other:?}"),
    }

    // Hand over: a new token and a greater fencing token, in one step.
    let Handover::Handed(second) = lock
        .hand_over(&first, token(), TTL)
        .await
        .expect("hand over")
    else {
        panic!("the holder could not hand over");
    };
    assert!(second.fencing_token() > first.fencing_token());
    // The old lease is no longer ours: nothing it does touches the new holder.
    assert_eq!(lock.extend(&first, TTL).await.expect("stale extend"), None);
    assert!(!lock.release(&first).await.expect("stale release"));
    assert_eq!(
        lock.hand_over(&first, token(), TTL)
            .await
            .expect("stale hand over"),
        Handover::NotOwned
    );

    assert!(lock.release(&second).await.expect("release"));
    assert!(!lock.release(&second).await.expect("release twice"));
    assert_eq!(
        lock.extend(&second, TTL).await.expect("extend released"),
        None
    );

    let Attempt::Acquired(third) = lock.try_acquire("job", token(), TTL).await.expect("again")
    else {
        panic!("a released lock was busy");
    };
    assert!(third.fencing_token() > second.fencing_token());
}

#[tokio::test]
async fn bad_input_is_rejected_before_any_statement() {
    let server = common::server();
    let lock = common::lock(&server).await;
    for (name, ttl) in [
        ("", TTL),
        (&*"x".repeat(lock_core::MAX_NAME_LEN + 1), TTL),
        ("job", Duration::ZERO),
        ("job", lock_core::MAX_TTL + Duration::from_millis(1)),
    ] {
        let err = lock
            .try_acquire(name, token(), ttl)
            .await
            .expect_err("bad input");
        assert!(matches!(err, LockError::InvalidInput { .. }), "{err}");
        assert!(!err.may_have_applied());
    }
    // The longest TTL and name are accepted.
    let name = "n".repeat(lock_core::MAX_NAME_LEN);
    assert!(matches!(
        lock.try_acquire(&name, token(), lock_core::MAX_TTL)
            .await
            .expect("longest"),
        Attempt::Acquired(_)
    ));
    // Names are data, never SQL.
    let odd = "o'; DROP TABLE distlock_leases; --";
    assert!(matches!(
        lock.try_acquire(odd, token(), TTL).await.expect("odd name"),
        Attempt::Acquired(_)
    ));
    assert!(matches!(
        lock.try_acquire(odd, token(), TTL)
            .await
            .expect("odd name busy"),
        Attempt::Busy { .. }
    ));
}
