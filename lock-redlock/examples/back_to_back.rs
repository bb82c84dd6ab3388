//! Back-to-back acquire + release cycles of one client on one name over five throwaway
//! redis-servers (lock-testkit, free loopback ports, killed by PID at the end): the cycle rate
//! and what the nodes answered the acquires, with all five up, with one down (connection
//! refused) and with one hung (SIGSTOP). A measurement, not a test: it asserts nothing.
//!
//! ```sh
//! cargo run --release -p lock-redlock --example back_to_back -- [CYCLES]
//! ```
//!
//! `CYCLES` (default 20,000) cycles run with five healthy nodes, a tenth of them with one node
//! down, and a hundredth (at most 200) with one node hung. The node answers are read from the
//! `distlock_redlock_node_*` counters through a `metrics-util` `DebuggingRecorder`.

use std::collections::BTreeMap;
use std::error::Error;
use std::time::{Duration, Instant};

use lock_core::Locker;
use lock_redis::RedisLock;
use lock_redlock::Redlock;
use lock_redlock::metric::{
    NODE_ERRORS as METRIC_NODE_ERRORS, NODE_GRANTS as METRIC_NODE_GRANTS,
    NODE_REFUSALS as METRIC_NODE_REFUSALS, NODE_TIMEOUTS as METRIC_NODE_TIMEOUTS,
};
use lock_testkit::RedisServer;
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};

const NODES: usize = 5;
const NAME: &str = "b2b";

/// Per (counter, op): the sum over the nodes.
type Answers = BTreeMap<(String, String), u64>;

/// The node answers since the last snapshot (a snapshot takes the counters and resets them).
fn answers(snapshotter: &Snapshotter) -> Answers {
    let mut sums = Answers::new();
    for (key, _, _, value) in snapshotter.snapshot().into_vec() {
        let DebugValue::Counter(n) = value else {
            continue;
        };
        let key = key.key();
        if ![
            METRIC_NODE_GRANTS,
            METRIC_NODE_REFUSALS,
            METRIC_NODE_TIMEOUTS,
            METRIC_NODE_ERRORS,
        ]
        .contains(&key.name())
        {
            continue;
        }
        let op = key
            .labels()
            .find(|l| l.key() == "op")
            .map_or_else(String::new, |l| l.value().to_owned());
        *sums.entry((key.name().to_owned(), op)).or_insert(0) += n;
    }
    sums
}

fn count(answers: &Answers, name: &str, op: &str) -> u64 {
    answers
        .get(&(name.to_owned(), op.to_owned()))
        .copied()
        .unwrap_or(0)
}

/// Runs `cycles` cycles and prints one line of figures.
async fn scenario(
    label: &str,
    locker: &Locker,
    snapshotter: &Snapshotter,
    cycles: u32,
) -> Result<(), Box<dyn Error>> {
    // Left over from before: not this scenario's.
    drop(answers(snapshotter));
    let mut samples = Vec::with_capacity(cycles as usize);
    let mut busy = 0u32;
    let started = Instant::now();
    for _ in 0..cycles {
        let cycle = Instant::now();
        match locker.lock(NAME).try_acquire().await? {
            Some(guard) => {
                guard.release().await?;
            }
            None => busy += 1,
        }
        samples.push(cycle.elapsed());
    }
    let elapsed = started.elapsed();
    // Let the last rounds' stragglers be counted (a release on a hung node gives up within 1.5 s).
    tokio::time::sleep(Duration::from_secs(2)).await;
    let counted = answers(snapshotter);
    samples.sort_unstable();
    let pct = |p: usize| samples[(samples.len() * p / 100).min(samples.len() - 1)];
    let a = |name| count(&counted, name, "acquire");
    let r = |name| count(&counted, name, "release");
    println!(
        "{label:<22} {cycles:>6} cycles in {:>7.2} s = {:>7.0} cycles/s, p50 {:>8.1?}, p99 {:>8.1?}, busy cycles {busy}\n\
         {:<22} node acquire answers: granted {}, refused {}, timed out {}, errors {}; \
         release: released {}, not ours {}, timed out {}, errors {}",
        elapsed.as_secs_f64(),
        f64::from(cycles) / elapsed.as_secs_f64(),
        pct(50),
        pct(99),
        "",
        a(METRIC_NODE_GRANTS),
        a(METRIC_NODE_REFUSALS),
        a(METRIC_NODE_TIMEOUTS),
        a(METRIC_NODE_ERRORS),
        r(METRIC_NODE_GRANTS),
        r(METRIC_NODE_REFUSALS),
        r(METRIC_NODE_TIMEOUTS),
        r(METRIC_NODE_ERRORS),
    );
    Ok(())
}

fn main() -> Result<(), Box<dyn Error>> {
    let cycles: u32 = match std::env::args().nth(1) {
        Some(arg) => arg.parse().map_err(|_| "usage: back_to_back [CYCLES]")?,
        None => 20_000,
    };
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder.install()?;
    let mut servers: Vec<RedisServer> = (0..NODES)
        .map(|_| RedisServer::start())
        .collect::<Result<_, _>>()?;
    let mut builder = Redlock::builder();
    for server in &servers {
        builder = builder.node(RedisLock::from_url(&server.url())?);
    }
    let locker = Locker::new(builder.build()?);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async {
        // Warm-up: connections made, scripts loaded.
        scenario("warm-up", &locker, &snapshotter, 200).await?;
        scenario("5 healthy", &locker, &snapshotter, cycles).await?;
        servers[4].pause()?;
        let hung = scenario(
            "4 healthy, 1 hung",
            &locker,
            &snapshotter,
            (cycles / 100).clamp(1, 200),
        )
        .await;
        servers[4].resume()?;
        hung?;
        servers[4].stop();
        scenario("4 healthy, 1 down", &locker, &snapshotter, cycles / 10).await
    })?;
    drop(locker);
    drop(servers);
    Ok(())
}
