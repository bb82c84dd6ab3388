//! # distlock on a Redis Cluster
//!
//! Starts a throwaway Redis Cluster (3 masters + 3 replicas, through `lock-testkit`), takes locks
//! on names spread over every master, then kills the master that serves one of them while a
//! worker keeps taking it — and shows the lock carrying on once a replica has taken over. Waiters
//! are woken over sharded pub/sub. Exits non-zero if exclusion or fencing ever broke.
//!
//! ```text
//! cargo run --example cluster --features cluster
//! ```

use std::collections::HashSet;
use std::time::{Duration, Instant};

use distlock::redis::key_slot;
use distlock::{Locker, redis::RedisLock, redis::ReplicaPolicy};
use lock_testkit::RedisCluster;

type Error = Box<dyn std::error::Error>;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Error> {
    println!("starting a Redis Cluster: 3 masters, 3 replicas ...");
    let mut cluster = RedisCluster::start()?;
    let lock = RedisLock::builder()
        .cluster_urls(cluster.urls())
        .command_timeout(Duration::from_secs(2))
        // Each grant and renewal waits for the slot's replica: a failover keeps it.
        .wait_for_replicas(1, Duration::from_millis(200), ReplicaPolicy::Warn)
        .build()?;
    let locker = Locker::new(lock);

    println!("\n1. names spread over the slots, each on its own master:");
    let mut masters = HashSet::new();
    for name in [
        "order:1",
        "order:2",
        "order:3",
        "order:4",
        "{tenant:7}:invoice:9",
    ] {
        let guard = locker.lock(name).fixed_ttl(Duration::from_secs(10)).await?;
        let master = cluster.master_for_slot(key_slot(name))?;
        masters.insert(master);
        println!(
            "   {name:<22} slot {:>5} on node {master} (port {}), fencing token {}",
            key_slot(name),
            cluster.nodes()[master].port(),
            guard.fencing_token()
        );
        guard.release().await?;
    }
    println!("   {} masters served these names", masters.len());

    let name = "order:1";
    let victim = cluster.master_for_slot(key_slot(name))?;
    println!("\n2. a worker takes {name:?} in a loop; node {victim} (its master) will be killed:");
    let worker = {
        let locker = locker.clone();
        tokio::spawn(async move {
            let (mut granted, mut failed, mut last_fence, mut backwards) = (0, 0, 0, 0);
            let end = Instant::now() + Duration::from_secs(12);
            while Instant::now() < end {
                match locker
                    .lock(name)
                    .fixed_ttl(Duration::from_secs(2))
                    .wait(Duration::from_secs(3))
                    .await
                {
                    Ok(guard) => {
                        granted += 1;
                        if guard.fencing_token() <= last_fence {
                            backwards += 1;
                        }
                        last_fence = guard.fencing_token();
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        let _ = guard.release().await;
                    }
                    Err(error) => {
                        failed += 1;
                        println!("   attempt failed during the failover: {error}");
                    }
                }
            }
            (granted, failed, backwards)
        })
    };
    tokio::time::sleep(Duration::from_secs(2)).await;
    cluster.kill(victim);
    let killed = Instant::now();
    println!("   node {victim} killed (SIGKILL)");
    let successor = cluster.wait_for_failover(key_slot(name))?;
    println!(
        "   node {successor} took over the slot after {:.1?}",
        killed.elapsed()
    );
    let (granted, failed, backwards) = worker.await?;
    println!(
        "   {granted} grants, {failed} failed attempts, fencing went backwards {backwards} times"
    );

    if backwards > 0 || granted == 0 {
        println!("\nUNEXPECTED: the lock did not carry on correctly");
        std::process::exit(1);
    }
    println!("\nThe lock carried on through the failover; fencing tokens only went up.");
    Ok(())
}
