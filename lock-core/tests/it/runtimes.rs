//! One `Locker` used from several tokio runtimes, in sequence and at once, as every
//! `#[tokio::test]` and services that build a runtime per component use it: leases keep being
//! renewed whichever runtime granted them, also after the runtime that used the `Locker` first
//! is gone.
//!
//! Real time, not tokio's paused clock: a paused clock belongs to one runtime. The lease is
//! short and each hold is several leases long, so a lease that is not renewed is gone by the
//! check; renewal comes every third of the lease, so only a stall of a whole lease on this
//! machine could fail a correct build.

use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use lock_core::{Guard, Locker, MemoryLock};

const LEASE: Duration = Duration::from_millis(600);
const HOLD: Duration = Duration::from_millis(2_000);

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
}

fn locker() -> Locker {
    Locker::builder(MemoryLock::new()).lease(LEASE).build()
}

/// Holds `guard` for `hold` on the current runtime, then checks that it is still held and that
/// nobody else can take the name.
async fn hold_and_check(locker: &Locker, guard: Guard, hold: Duration) {
    tokio::time::sleep(hold).await;
    assert!(guard.is_held(), "{} was not renewed", guard.name());
    let other = tokio::spawn(locker.lock(guard.name().to_owned()).try_acquire());
    assert!(
        other.await.expect("joined").expect("ok").is_none(),
        "{} is free although its guard lives",
        guard.name()
    );
    guard.release().await.expect("released while ours");
}

#[test]
fn a_second_runtime_renews_after_the_first_is_gone() {
    let locker = locker();
    for round in 0..3 {
        let rt = runtime();
        rt.block_on(async {
            let guard = locker.lock(format!("job:{round}")).await.expect("free");
            hold_and_check(&locker, guard, HOLD).await;
        });
        drop(rt);
    }
}

#[test]
fn two_runtimes_at_once_each_renew_their_own_leases() {
    let locker = locker();
    // The first runtime takes its lock first and ends first: the second must not depend on it.
    let both_hold = Arc::new(Barrier::new(2));
    let first = {
        let (locker, both_hold) = (locker.clone(), Arc::clone(&both_hold));
        thread::spawn(move || {
            runtime().block_on(async {
                let guard = locker.lock("first").await.expect("free");
                both_hold.wait();
                hold_and_check(&locker, guard, HOLD / 2).await;
            });
        })
    };
    let second = thread::spawn(move || {
        both_hold.wait();
        runtime().block_on(async {
            let guard = locker.lock("second").await.expect("free");
            hold_and_check(&locker, guard, HOLD * 2).await;
        });
    });
    first.join().expect("first runtime passed");
    second.join().expect("second runtime passed");
}

#[test]
fn a_guard_outliving_its_runtime_is_adopted_by_the_next_grant() {
    let locker = locker();
    let moved = runtime()
        .block_on(locker.lock("moved").acquire())
        .expect("free");
    // The granting runtime is gone; the guard lives on. The next grant, on another runtime,
    // adopts its renewal.
    runtime().block_on(async {
        let other = locker.lock("other").await.expect("free");
        tokio::join!(
            hold_and_check(&locker, moved, HOLD),
            hold_and_check(&locker, other, HOLD),
        );
    });
}
