//! The fence every distlock store keeps, on etcd (`EtcdLock::guarded_commit(&fence, ops)`): a
//! holder paused past its lease has its late write refused once its successor wrote, with
//! `LockError::Fenced` naming the successor's token; an equal token is accepted; the first
//! fence of a resource creates its record; a guard's token fences any resource it names.

use std::time::Duration;

use etcd_client::{TxnOp, TxnOpResponse};
use lock_core::{Fence, LockError, Locker};

use crate::common::{lock_on, one_member};

/// The text stored at `key`.
async fn text(lock: &lock_etcd::EtcdLock, key: &str) -> Option<String> {
    let mut kv = lock.client().await.expect("client").kv_client();
    let answer = kv.get(key, None).await.expect("get");
    answer
        .kvs()
        .first()
        .map(|kv| String::from_utf8_lossy(kv.value()).into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_holders_late_write_is_fenced_after_its_successor_wrote() {
    let cluster = one_member();
    let lock = lock_on(&cluster);
    let first = Locker::new(lock.clone())
        .lock("order:42")
        .fixed_ttl(Duration::from_secs(1))
        .await
        .expect("granted");
    let fence = first.fence().for_resource("orders/42");
    let answers = lock
        .guarded_commit(&fence, [TxnOp::put("orders/42", "first", None)])
        .await
        .expect("the first fence of a resource is admitted");
    assert_eq!(answers.len(), 1, "one answer per op");
    assert!(matches!(answers[0], TxnOpResponse::Put(_)));
    lock.guarded_commit(&fence, [TxnOp::put("orders/42", "first again", None)])
        .await
        .expect("an equal token is admitted");

    // The first holder stops past its 1 s lease; a successor takes the name and writes.
    let successor = Locker::new(lock.clone())
        .lock("order:42")
        .wait(Duration::from_secs(30))
        .await
        .expect("granted once the first lease ran out");
    assert!(successor.fencing_token() > first.fencing_token());
    let next = successor.fence().for_resource("orders/42");
    for i in 0..3 {
        lock.guarded_commit(
            &next,
            [TxnOp::put("orders/42", format!("second {i}"), None)],
        )
        .await
        .expect("every write of the successor applies");
    }

    let late = lock
        .guarded_commit(&fence, [TxnOp::put("orders/42", "late", None)])
        .await;
    match late {
        Err(LockError::Fenced {
            resource,
            token,
            current,
        }) => {
            assert_eq!(resource, "orders/42");
            assert_eq!(token, fence.token);
            assert_eq!(current, next.token, "the refusal names the record");
        }
        other => panic!("the late write was not fenced: {other:?}"),
    }
    assert_eq!(text(&lock, "orders/42").await.as_deref(), Some("second 2"));

    // The same transaction, sent with the caller's own client: refused, nothing applied.
    let own = lock
        .guarded_txn(&fence, [TxnOp::put("orders/42", "late again", None)])
        .expect("a valid fence");
    let answer = lock
        .client()
        .await
        .expect("client")
        .txn(own)
        .await
        .expect("txn");
    assert!(!answer.succeeded());
    assert_eq!(text(&lock, "orders/42").await.as_deref(), Some("second 2"));
    successor.release().await.expect("released");
    drop(first);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_are_per_resource_and_bad_resources_send_nothing() {
    let cluster = one_member();
    let lock = lock_on(&cluster);
    lock.guarded_commit(&Fence::new("a", 10), [TxnOp::put("a", "10", None)])
        .await
        .expect("admitted");
    // Another resource has its own record: a smaller token is admitted there.
    lock.guarded_commit(&Fence::new("b", 3), [TxnOp::put("b", "3", None)])
        .await
        .expect("admitted");
    assert!(matches!(
        lock.guarded_commit(&Fence::new("a", 9), [TxnOp::put("a", "9", None)])
            .await,
        Err(LockError::Fenced { current: 10, .. })
    ));
    lock.guarded_commit(&Fence::new("a", u64::MAX), [TxnOp::put("a", "max", None)])
        .await
        .expect("the largest token is admitted");
    assert_eq!(text(&lock, "a").await.as_deref(), Some("max"));
    assert!(matches!(
        lock.guarded_commit(&Fence::new("", 1), [TxnOp::put("a", "x", None)])
            .await,
        Err(LockError::InvalidInput { .. })
    ));
}
