//! Measures `ObjectStoreLock` on a throwaway SeaweedFS (lock-testkit's `SeaweedfsServer`):
//!
//! - S1: uncontended acquire + release cycles of one task (through a `Locker`), against a
//!   hand-written minimal lock on the same store and client (bare conditional writes: a
//!   `PUT If-None-Match: *` of the token to acquire, a `DELETE` to release);
//! - S2: the same with 8 tasks, each on a name of its own;
//! - the takeover latency after a holder dies (stops renewing), as its excess over one lease.
//!
//! `cargo run --release -p lock-object-store --example measure` (`bash
//! scripts/ensure-seaweedfs.sh` first). Timing figures are never asserted in tests.

use std::sync::Arc;
use std::time::Duration;

use lock_core::backend::{Attempt, Lock};
use lock_core::{Locker, Token};
use lock_object_store::ObjectStoreLock;
use lock_object_store::object_store::path::Path;
use lock_object_store::object_store::{ObjectStore, ObjectStoreExt as _, PutMode, PutOptions};
use lock_testkit::{SEAWEEDFS_ACCESS_KEY, SEAWEEDFS_SECRET_KEY, SeaweedfsServer};
use tokio::time::Instant;

/// How long each run lasts.
const RUN: Duration = Duration::from_secs(5);

fn lock(server: &SeaweedfsServer, prefix: &str) -> ObjectStoreLock {
    ObjectStoreLock::builder()
        .url(server.url(prefix))
        .endpoint(server.endpoint())
        .credentials(SEAWEEDFS_ACCESS_KEY, SEAWEEDFS_SECRET_KEY)
        .region("us-east-1")
        .build()
        .expect("valid configuration")
}

/// Cycles/s of `tasks` tasks, each running `cycle` on a name of its own for [`RUN`].
async fn rate<F, Fut>(tasks: usize, cycle: F) -> f64
where
    F: Fn(String) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let started = Instant::now();
    let handles = (0..tasks).map(|i| {
        let cycle = cycle.clone();
        tokio::spawn(async move {
            let mut n = 0u64;
            while started.elapsed() < RUN && n < 1_000_000 {
                cycle(format!("n{i}")).await;
                n += 1;
            }
            n
        })
    });
    let total: u64 = futures::future::join_all(handles)
        .await
        .into_iter()
        .map(|r| r.expect("task"))
        .sum();
    total as f64 / started.elapsed().as_secs_f64()
}

/// The hand-written lock's cycle: create the object if absent, delete it.
async fn bare_cycle(store: Arc<dyn ObjectStore>, path: Path) {
    let token = Token::generate().expect("rng").to_hex().as_str().to_owned();
    let put = store
        .put_opts(
            &path,
            token.into_bytes().into(),
            PutOptions::from(PutMode::Create),
        )
        .await;
    if put.is_ok() {
        store.delete(&path).await.expect("delete");
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let server = SeaweedfsServer::start().expect("start seaweedfs");
    for tasks in [1, 8] {
        let ours = Locker::new(lock(&server, &format!("ours{tasks}")));
        let distlock = rate(tasks, move |name| {
            let locker = ours.clone();
            async move {
                let guard = locker.lock(name.as_str()).await.expect("free");
                guard.release().await.expect("ours");
            }
        })
        .await;
        let store = Arc::clone(lock(&server, "bare").store());
        let bare = rate(tasks, move |name| {
            bare_cycle(
                Arc::clone(&store),
                Path::from(format!("bare{tasks}/{name}")),
            )
        })
        .await;
        println!(
            "S{}: {tasks} task(s): distlock {distlock:.0} cycles/s, hand-written {bare:.0} \
             cycles/s, ratio {:.2}",
            if tasks == 1 { 1 } else { 2 },
            distlock / bare
        );
    }
    takeover(&server).await;
}

/// A holder takes a lease and dies (never renews, never releases); a contender polls from
/// that moment. Prints the time to its grant, less one lease.
async fn takeover(server: &SeaweedfsServer) {
    let lease = Duration::from_secs(2);
    let mut excess = Vec::new();
    for round in 0..5 {
        let name = format!("takeover{round}");
        let dead = lock(server, "takeover");
        let Attempt::Acquired(_) = dead
            .try_acquire(&name, Token::generate().expect("rng"), lease)
            .await
            .expect("answers")
        else {
            panic!("busy");
        };
        let died = Instant::now();
        let contender = Locker::new(lock(server, "takeover"));
        let guard = contender
            .lock(name.as_str())
            .fixed_ttl(lease)
            .wait(lease * 5)
            .await
            .expect("taken over");
        excess.push(died.elapsed().saturating_sub(lease));
        guard.release().await.expect("ours");
    }
    excess.sort();
    println!(
        "takeover after a holder died, lease {lease:?}: excess over the lease min {:?}, median {:?}, max {:?}",
        excess[0],
        excess[excess.len() / 2],
        excess[excess.len() - 1]
    );
}
