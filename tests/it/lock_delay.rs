//! `lock_delay = ".."`: the store keeps the name that much longer than the lease (so a
//! process that dies holding it leaves the name unavailable for the delay after its lease),
//! while the body's own lease is the `ttl` alone; a normal return releases at once. What the
//! delay does after a crash is checked on every backend by the conformance suite
//! (`lock_delay` module) and `distlock run --lock-delay`'s process tests.

use std::sync::Arc;
use std::time::Duration;

use distlock::{LockError, current_leases, distributed_lock};
use tokio::time::Instant;

use crate::common::Backend;

const TTL: Duration = Duration::from_millis(800);
const DELAY: Duration = Duration::from_secs(5);

/// The holder's TTL as the store tells it (to anyone who asks), and the body's own validity.
async fn store_and_own(backend: &Backend, name: &str) -> (Duration, Duration) {
    let holder = backend
        .locker
        .backend_lock()
        .describe_holder(name)
        .await
        .expect("answers")
        .expect("held");
    let own = current_leases()[0].valid_until() - Instant::now();
    (holder.ttl.expect("a TTL"), own)
}

#[distributed_lock("delayed:{id}", locker = backend.locker, ttl = "800ms", lock_delay = "5s")]
async fn fixed(backend: &Backend, id: u32) -> Result<(Duration, Duration), LockError> {
    Ok(store_and_own(backend, &format!("delayed:{id}")).await)
}

#[distributed_lock("delayed:{id}", locker = backend.locker, lock_delay = "5s")]
async fn renewed(backend: &Backend, id: u32) -> Result<(Duration, Duration), LockError> {
    Ok(store_and_own(backend, &format!("delayed:{id}")).await)
}

#[distributed_lock(["delayed:{a}", "delayed:{b}"], locker = backend.locker, ttl = "800ms", lock_delay = "5s")]
async fn both(backend: &Backend, a: u32, b: u32) -> Result<(Duration, Duration), LockError> {
    Ok(store_and_own(backend, &format!("delayed:{a}")).await)
}

#[distributed_lock("delayed:{id}", locker = backend.locker, wait = "0s")]
async fn free(backend: &Backend, id: u32) -> Result<(), LockError> {
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_keeps_the_delay_and_the_body_its_lease() {
    let lease = Duration::from_secs(2);
    for backend in [
        Backend::memory_with(|b| b.lease(lease)),
        Backend::redis_with(|b| b.lease(lease)),
    ] {
        let backend = Arc::new(backend);
        for (what, (store, own), ttl) in [
            ("a fixed ttl", fixed(&backend, 1).await.expect("free"), TTL),
            (
                "a renewed lease",
                renewed(&backend, 2).await.expect("free"),
                lease,
            ),
            (
                "a multi-lock",
                both(&backend, 3, 4).await.expect("free"),
                TTL,
            ),
        ] {
            assert!(
                store > ttl && store <= ttl + DELAY,
                "{what}: the store keeps the name {store:?}, not the lease plus the lock_delay"
            );
            assert!(
                own <= ttl,
                "{what}: the body's validity {own:?} includes the delay"
            );
        }
        // Each returned normally: released at once, the delay did not apply.
        for id in [1, 2, 3, 4] {
            free(&backend, id).await.expect("released at once");
        }
    }
}
