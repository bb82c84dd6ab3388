//! What one task's acquire + release of a fixed TTL costs through `EtcdLock` and a `Locker`,
//! against the bare etcd requests the same client sends for it (the put-if-absent transaction
//! on a lease granted beforehand, as the bucket lease is for most grants, and the
//! compare-and-delete transaction), in the same run on one throwaway member.
//!
//! `cargo run --release -p lock-etcd --example cycle_cost -- 2000` (the cycles per side;
//! default 1000). Needs `etcd` (`scripts/ensure-etcd.sh`).

use std::time::{Duration, Instant};

use lock_core::Locker;
use lock_etcd::EtcdLock;
use lock_etcd::etcd_client::{Compare, CompareOp, PutOptions, Txn, TxnOp};
use lock_testkit::{EtcdCluster, EtcdNetwork};

fn summary(what: &str, mut samples: Vec<Duration>) -> f64 {
    samples.sort();
    let total: Duration = samples.iter().sum();
    let rate = samples.len() as f64 / total.as_secs_f64();
    let p50 = samples[samples.len() / 2];
    let p99 = samples[samples.len() * 99 / 100];
    println!("{what:<32} {rate:>8.0} cycles/s   p50 {p50:>9.2?}   p99 {p99:>9.2?}");
    rate
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cycles: usize = std::env::args()
        .nth(1)
        .map(|n| n.parse())
        .transpose()?
        .unwrap_or(1_000);
    // Loopback: a measurement, never partitioned; no privilege needed.
    let cluster = EtcdCluster::builder()
        .network(EtcdNetwork::Loopback)
        .start()?;
    let endpoint = cluster.member(0).direct_endpoint();
    let lock = EtcdLock::new([endpoint])?;
    let mut client = lock.client().await?;
    let locker = Locker::new(lock.clone());
    let ttl = Duration::from_secs(10);
    // The bare side's one lease, as long as the run: the bucket lease's part.
    let id = client.lease_grant(3_600, None).await?.id();

    for round in 0..2 {
        let mut bare = Vec::with_capacity(cycles);
        for i in 0..cycles {
            let started = Instant::now();
            let key = format!("bare/{round}/{i}");
            let put = Txn::new()
                .when([Compare::create_revision(key.as_str(), CompareOp::Equal, 0)])
                .and_then([TxnOp::put(
                    key.as_str(),
                    "dl:0123456789abcdef0123456789abcdef",
                    Some(PutOptions::new().with_lease(id)),
                )])
                .or_else([TxnOp::get(key.as_str(), None)]);
            assert!(client.txn(put).await?.succeeded());
            let delete = Txn::new()
                .when([Compare::value(
                    key.as_str(),
                    CompareOp::Equal,
                    "dl:0123456789abcdef0123456789abcdef",
                )])
                .and_then([TxnOp::delete(key.as_str(), None)]);
            assert!(client.txn(delete).await?.succeeded());
            bare.push(started.elapsed());
        }
        let mut ours = Vec::with_capacity(cycles);
        for i in 0..cycles {
            let started = Instant::now();
            let guard = locker
                .lock(format!("lock/{round}/{i}").as_str())
                .fixed_ttl(ttl)
                .await?;
            guard.release().await?;
            ours.push(started.elapsed());
        }
        println!("round {round} ({cycles} cycles each, one task, one member on loopback):");
        let bare = summary("bare etcd requests", bare);
        let ours = summary("Locker + EtcdLock", ours);
        println!("distlock / bare: {:.0} %", 100.0 * ours / bare);
    }
    Ok(())
}
