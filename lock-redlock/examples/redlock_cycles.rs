//! Runs N uncontended acquire + release cycles of one client (a `Locker` over a `Redlock` of
//! one `RedisLock` per URL, the defaults: fenced, renewed lease) on a current-thread runtime,
//! and exits: a fixed workload to count the client's instructions of under callgrind.
//!
//! ```sh
//! cargo build --release -p lock-redlock --example redlock_cycles
//! valgrind --tool=callgrind --callgrind-out-file=out \
//!     target/release/examples/redlock_cycles <cycles> <redis-url>...
//! ```
//!
//! Run it with N and 2N cycles: `(I(2N) − I(N)) / N` is the cost of one cycle, free of
//! start-up. The servers are the caller's (throwaway ones on free ports, say).

use lock_core::Locker;
use lock_redis::RedisLock;
use lock_redlock::Redlock;

const USAGE: &str = "usage: redlock_cycles <cycles> <redis-url>...";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let cycles: u32 = args.next().ok_or(USAGE)?.parse().map_err(|_| USAGE)?;
    let urls: Vec<String> = args.collect();
    if urls.is_empty() {
        return Err(USAGE.into());
    }
    let mut builder = Redlock::builder();
    for url in &urls {
        builder = builder.node(RedisLock::from_url(url)?);
    }
    let locker = Locker::new(builder.build()?);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        for _ in 0..cycles {
            let guard = locker
                .lock("redlock-cycles")
                .try_acquire()
                .await?
                .ok_or("the lock was busy")?;
            guard.release().await?;
        }
        Ok(())
    })
}
