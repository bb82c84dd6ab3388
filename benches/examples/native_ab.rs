//! Native commands against scripts, in the load tool's S1 and S2 shapes, on one Valkey server:
//! the hand-written lock, and `Locker` over `RedisLock` fenced and `fencing(false)`, each with
//! `native_commands` on (release by `DELIFEQ`) and off (the release script). The peers run in
//! short alternating rounds (A, B, C… then B, C, … A) so a slow patch of the shared machine
//! weighs on all of them alike; each peer's median over the rounds is reported with its spread (min–max)
//! and its ratio to the hand-written lock's median.
//!
//! `cargo run --release -p distlock-bench --example native_ab -- [rounds] [seconds per round]`
//! (default 5 rounds of 1 s). Starts its own valkey-server (`scripts/ensure-valkey.sh`) on a
//! free loopback port through lock-testkit and stops it at the end.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use distlock_bench::HandLock;
use lock_core::Locker;
use lock_redis::RedisLock;
use lock_testkit::RedisServer;

/// One peer: how it takes and gives back the lock `name`.
#[derive(Clone)]
enum Peer {
    Hand(Arc<HandLock>),
    Locker(Locker),
}

impl Peer {
    async fn cycle(&self, name: &str) -> Result<(), String> {
        match self {
            Self::Hand(hand) => {
                let token = hand
                    .try_acquire(name, Duration::from_secs(30))
                    .await
                    .map_err(|e| e.to_string())?
                    .ok_or("busy")?;
                hand.release(name, &token)
                    .await
                    .map_err(|e| e.to_string())?;
            }
            Self::Locker(locker) => {
                let guard = locker
                    .lock(name)
                    .try_acquire()
                    .await
                    .map_err(|e| e.to_string())?
                    .ok_or("busy")?;
                guard.release().await.map_err(|e| e.to_string())?;
            }
        }
        Ok(())
    }
}

/// Cycles per second of `tasks` tasks, each on its own name, for `warmup` then `measure`.
async fn window(
    peer: &Peer,
    label: &str,
    tasks: usize,
    warmup: Duration,
    measure: Duration,
) -> f64 {
    let stop = Arc::new(AtomicBool::new(false));
    let counting = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let mut handles = Vec::new();
    for task in 0..tasks {
        let (peer, stop, counting, done) = (
            peer.clone(),
            Arc::clone(&stop),
            Arc::clone(&counting),
            Arc::clone(&done),
        );
        let name = format!("ab:{label}:{task}");
        handles.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                peer.cycle(&name).await.expect("cycle");
                if counting.load(Ordering::Relaxed) {
                    done.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    tokio::time::sleep(warmup).await;
    counting.store(true, Ordering::Relaxed);
    let started = Instant::now();
    tokio::time::sleep(measure).await;
    let (count, elapsed) = (done.load(Ordering::Relaxed), started.elapsed());
    stop.store(true, Ordering::Relaxed);
    for handle in handles {
        handle.await.expect("task");
    }
    count as f64 / elapsed.as_secs_f64()
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    if values.len().is_multiple_of(2) {
        (values[mid - 1] + values[mid]) / 2.0
    } else {
        values[mid]
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let rounds: usize = args.first().map_or(Ok(5), |a| a.parse())?;
    let seconds: f64 = args.get(1).map_or(Ok(1.0), |a| a.parse())?;
    let measure = Duration::from_secs_f64(seconds);
    let warmup = measure / 5;
    let server = RedisServer::builder().valkey().start()?;
    let url = server.url();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let lock = |fencing: bool, native: bool| {
            RedisLock::builder()
                .url(url.as_str())
                .fencing(fencing)
                .native_commands(native)
                .build()
                .map(|lock| Peer::Locker(Locker::new(lock)))
        };
        let peers = [
            ("hand-written", Peer::Hand(Arc::new(HandLock::connect(&url).await?))),
            ("fencing(false), script", lock(false, false)?),
            ("fencing(false), native", lock(false, true)?),
            ("fenced, script", lock(true, false)?),
            ("fenced, native", lock(true, true)?),
        ];
        for (scenario, tasks) in [("S1", 1), ("S2", 32)] {
            let mut rates: Vec<Vec<f64>> = peers.iter().map(|_| Vec::new()).collect();
            for round in 0..rounds {
                // Each round starts one peer later, so no peer always runs first or last.
                for k in 0..peers.len() {
                    let i = (round + k) % peers.len();
                    let (label, peer) = &peers[i];
                    let slug = label.replace([' ', ',', '(', ')'], "");
                    rates[i].push(window(peer, &slug, tasks, warmup, measure).await);
                }
            }
            println!("{scenario} on Valkey ({tasks} task(s), {rounds} rounds of {seconds} s):");
            let medians: Vec<f64> = rates.iter_mut().map(|r| median(r)).collect();
            for ((label, _), (rate, m)) in peers.iter().zip(rates.iter().zip(&medians)) {
                let (lo, hi) = (rate[0], rate[rate.len() - 1]);
                println!(
                    "  {label:<24} median {m:>8.0} cycles/s  (min {lo:.0}, max {hi:.0})  {:.2}× hand-written",
                    m / medians[0]
                );
            }
        }
        Ok::<_, Box<dyn std::error::Error>>(())
    })?;
    drop(server);
    Ok(())
}
