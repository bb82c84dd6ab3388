//! Runs N uncontended acquire + release cycles of one client against a Redis URL and exits:
//! the workload `scripts/client-cost.sh` counts instructions of under callgrind.
//!
//! `cargo run --release -p distlock-bench --example s1_cycles -- <redis-url> <client> <cycles>`
//! with `client` one of `hand` (the hand-written lock), `rslock` (rslock 0.10's `LockManager`
//! over the one server: `lock` + `Lock::release`), `unfenced` (`Locker` over a `RedisLock`
//! built with `fencing(false)`) and `fenced` (the defaults).

use std::time::Duration;

use distlock_bench::HandLock;
use lock_core::Locker;
use lock_redis::RedisLock;

const USAGE: &str = "usage: s1_cycles <redis-url> <hand|rslock|unfenced|fenced> <cycles>";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [url, client, cycles] = args.as_slice() else {
        return Err(USAGE.into());
    };
    let cycles: u32 = cycles.parse().map_err(|_| USAGE)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        match client.as_str() {
            "hand" => {
                let hand = HandLock::connect(url).await?;
                for _ in 0..cycles {
                    let token = hand
                        .try_acquire("s1:hand", Duration::from_secs(30))
                        .await?
                        .ok_or("the lock was busy")?;
                    hand.release("s1:hand", &token).await?;
                }
            }
            "rslock" => {
                let manager = rslock::LockManager::new(vec![url.as_str()]);
                for _ in 0..cycles {
                    let lock = manager.lock("s1:rslock", Duration::from_secs(30)).await?;
                    lock.release().await;
                }
            }
            "unfenced" | "fenced" => {
                let lock = RedisLock::builder()
                    .url(url.as_str())
                    .fencing(client == "fenced")
                    .build()?;
                let locker = Locker::new(lock);
                for _ in 0..cycles {
                    let guard = locker
                        .lock("s1:distlock")
                        .try_acquire()
                        .await?
                        .ok_or("the lock was busy")?;
                    guard.release().await?;
                }
            }
            _ => return Err(USAGE.into()),
        }
        Ok(())
    })
}
