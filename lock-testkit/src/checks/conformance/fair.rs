//! The fair lock ([`Locker::fair`](lock_core::Locker::fair)): grants in the order the
//! processes asked, single tries that do not jump the queue, waiters that give up leave no
//! trace, and the fair lock is the mutex of its name.

use std::sync::Arc;
use std::time::Duration;

use lock_core::Guard;
use tokio::sync::Notify;

use super::queued::QueueWatched;
use super::{Backend, name};

async fn release(guard: Guard) {
    let name = guard.name().to_owned();
    guard
        .release()
        .await
        .unwrap_or_else(|e| panic!("release of the fair lock {name}: {e}"));
}

/// Three waiters on lockers of their own queue one after the other behind a holder; once it
/// releases, they are granted in the order they asked. Each waiter starts only once the one
/// before it has been answered busy by the store (its place in the queue taken), so the order
/// they asked in is known however slow the machine is.
pub async fn grants_in_arrival_order(backend: &Backend, prefix: &str) {
    let name = name(prefix, "arrival-order");
    let holder = backend.locker().fair(name.as_str()).await.expect("free");
    let (order_tx, mut order_rx) = tokio::sync::mpsc::unbounded_channel();
    let mut waiters = Vec::new();
    for id in 0..3 {
        let queued = Arc::new(Notify::new());
        let locker = QueueWatched::locker(backend, Arc::clone(&queued));
        let (name, order) = (name.clone(), order_tx.clone());
        let patience = backend.patience;
        waiters.push(tokio::spawn(async move {
            let guard = locker
                .fair(name.as_str())
                .wait(patience)
                .await
                .expect("granted in turn");
            order.send(id).expect("the order is read");
            release(guard).await;
        }));
        backend
            .within("the waiter's first busy answer", queued.notified())
            .await;
    }
    release(holder).await;
    let mut order = Vec::new();
    for _ in 0..3 {
        order.push(
            backend
                .within("the next grant", order_rx.recv())
                .await
                .expect("open"),
        );
    }
    assert_eq!(order, [0, 1, 2], "fair waiters granted out of order");
    for waiter in waiters {
        backend.within("a waiter", waiter).await.expect("no panic");
    }
}

/// A single try is refused while anyone queues, even when the lock itself is free.
pub async fn single_try_does_not_jump_the_queue(backend: &Backend, prefix: &str) {
    let name = name(prefix, "single-try");
    let holder = backend.locker().fair(name.as_str()).await.expect("free");
    let waiter = {
        let (locker, name, patience) = (backend.locker(), name.clone(), backend.patience);
        tokio::spawn(async move { locker.fair(name.as_str()).wait(patience).await })
    };
    tokio::time::sleep(backend.settle).await;
    let jumper = backend.locker();
    assert!(
        jumper
            .fair(name.as_str())
            .try_acquire()
            .await
            .expect("answers")
            .is_none(),
        "a single try got a held fair lock"
    );
    release(holder).await;
    // Whether or not the waiter has taken it yet, it is queued ahead of any single try.
    assert!(
        jumper
            .fair(name.as_str())
            .try_acquire()
            .await
            .expect("answers")
            .is_none(),
        "a single try overtook a queued waiter"
    );
    let guard = backend
        .within("the queued waiter's grant", waiter)
        .await
        .expect("no panic")
        .expect("granted");
    release(guard).await;
}

/// A waiter that gives up (its wait runs out) takes its place in the queue with it: the next
/// single try after the holder's release is granted at once.
pub async fn gave_up_waiter_leaves_no_trace(backend: &Backend, prefix: &str) {
    let name = name(prefix, "gave-up");
    let holder = backend.locker().fair(name.as_str()).await.expect("free");
    let gave_up = backend
        .locker()
        .fair(name.as_str())
        .wait(backend.settle)
        .await;
    assert!(gave_up.is_err(), "the lock was held: {gave_up:?}");
    release(holder).await;
    let next = backend
        .locker()
        .fair(name.as_str())
        .try_acquire()
        .await
        .expect("answers")
        .expect("nobody queues: granted at once");
    release(next).await;
}

/// A fair holder keeps plain requests for the name out, and a plain holder keeps fair ones out.
pub async fn fair_is_the_mutex(backend: &Backend, prefix: &str) {
    let name = name(prefix, "the-mutex");
    let (plain, fair) = (backend.locker(), backend.locker());
    let held = fair.fair(name.as_str()).await.expect("free");
    let refused = plain
        .lock(name.as_str())
        .try_acquire()
        .await
        .expect("answers");
    assert!(refused.is_none(), "a plain request got a fairly held lock");
    release(held).await;
    let held = plain.lock(name.as_str()).await.expect("free");
    let refused = fair.fair(name.as_str()).wait(Duration::ZERO).await;
    assert!(refused.is_err(), "a fair request got a plainly held lock");
    held.release().await.expect("ours");
}
