//! The repro of a bug users hit: a default locker installed once, then `#[distributed_lock]`
//! functions run from two `#[tokio::test]`s — two runtimes, in whatever order the harness runs
//! them. Each lease outlives several lease lengths, so it must be renewed on its own runtime,
//! not by a watchdog left on the first runtime (gone when its test ended).
//!
//! The default stays installed for the rest of this binary's process: `default_locker`, which
//! needs none installed, runs in a process of its own.

use std::sync::Once;
use std::time::Duration;

use distlock::{LockError, Locker, MemoryLock, distributed_lock};

const LEASE: Duration = Duration::from_millis(300);

fn install_default_once() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        distlock::set_default_locker(Locker::builder(MemoryLock::new()).lease(LEASE).build());
    });
}

#[distributed_lock("runtime:{test}")]
async fn outlive_the_lease(test: &str, hold: Duration) -> Result<u64, LockError> {
    tokio::time::sleep(hold).await;
    let lease = distlock::current_lease().expect("locked");
    assert!(lease.is_held());
    Ok(lease.fencing_token())
}

#[tokio::test]
async fn first_runtime() {
    install_default_once();
    outlive_the_lease("first", LEASE * 4)
        .await
        .expect("renewed while the function ran");
}

#[tokio::test]
async fn second_runtime() {
    install_default_once();
    outlive_the_lease("second", LEASE * 8)
        .await
        .expect("renewed while the function ran");
}
