//! # distlock through Sentinel
//!
//! Starts a throwaway primary, replica and three sentinels (through `lock-testkit`), holds a
//! renewed lock while a second client waits for it, kills the primary, and shows the lock
//! carrying on against the master the sentinels promote: the held lease is renewed there, and
//! the waiter is woken when it is released. Exits non-zero if anything unexpected happens.
//!
//! ```text
//! cargo run --example sentinel --features sentinel
//! ```

use std::time::{Duration, Instant};

use distlock::{Locker, redis::RedisLock, redis::ReplicaPolicy};
use lock_testkit::RedisSentinelSet;

type Error = Box<dyn std::error::Error>;

fn lock(set: &RedisSentinelSet) -> Result<RedisLock, distlock::LockError> {
    RedisLock::builder()
        .sentinel(set.sentinel_urls(), set.master_name())
        .command_timeout(Duration::from_secs(1))
        .wait_for_replicas(1, Duration::from_millis(200), ReplicaPolicy::Warn)
        .build()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Error> {
    println!("starting a primary, a replica and three sentinels ...");
    let mut set = RedisSentinelSet::start()?;
    println!(
        "   sentinels name {} as master {:?}",
        set.primary()?,
        set.master_name()
    );

    // The lease must outlast a failover (a few seconds) for renewal to carry it over.
    let holder = Locker::builder(lock(&set)?)
        .lease(Duration::from_secs(8))
        .build();
    let waiter_side = Locker::new(lock(&set)?);

    let guard = holder.lock("nightly-report").await?;
    println!(
        "\n1. holder took \"nightly-report\", fencing token {}",
        guard.fencing_token()
    );
    let waiter = tokio::spawn(async move {
        let started = Instant::now();
        let guard = waiter_side
            .lock("nightly-report")
            .wait(Duration::from_secs(60))
            .await?;
        let fence = guard.fencing_token();
        guard.release().await?;
        Ok::<_, distlock::LockError>((started.elapsed(), fence))
    });

    let old = set.kill_primary()?;
    let killed = Instant::now();
    println!("\n2. primary {old} killed; waiting for the sentinels ...");
    let new = set.wait_for_failover()?;
    println!("   {new} promoted after {:.1?}", killed.elapsed());

    tokio::time::sleep(Duration::from_secs(5)).await;
    println!(
        "\n3. five seconds later the holder's lease is {}",
        if guard.is_held() {
            "still held (renewed on the new master)"
        } else {
            "LOST"
        }
    );
    let held = guard.is_held();
    let first_fence = guard.fencing_token();
    let released = guard.release().await;
    println!("   released on the new master: {released:?}");
    let (waited, fence) = waiter.await??;
    println!("   the waiter got it after {waited:.1?} with fencing token {fence}");

    if !held || released.is_err() || fence <= first_fence {
        println!("\nUNEXPECTED: the lock did not carry on correctly");
        std::process::exit(1);
    }
    println!("\nThe lock followed the failover; fencing tokens only went up.");
    Ok(())
}
