//! The rslock baseline (S1–S4): [rslock](https://crates.io/crates/rslock) 0.10, the Redlock
//! crate most Rust users reach for, on the same redis-rs as distlock.
//!
//! A `LockManager` over one server (S1–S3) or the Redlock's 3 or 5 servers (S4). A cycle is
//! `lock` (one `SET NX PX` per node, joined) and `Lock::release` (the compare-and-delete
//! script on every node, joined: it returns once every node answered).

use std::time::Duration;

use rslock::LockManager;

/// Attempts of one `LockManager::lock` call before it gives up (`acquire` then calls `lock`
/// again, without a pause): rslock's default.
const RETRY_COUNT: u32 = 3;

/// rslock sleeps a random *whole* number of milliseconds in `0..RETRY_DELAY` after a refused
/// attempt. Its default, 200 ms, would make S3 measure that sleep (a gap of tens of ms); 1 ms
/// would always draw 0 and spin. 2 ms draws 0 or 1 ms: the closest to the hand-written lock's
/// fixed 1 ms poll that is still rslock's own retry loop.
pub(crate) const RETRY_DELAY: Duration = Duration::from_millis(2);

/// A `LockManager` over the servers at `urls`, with S3's retry settings (S1, S2 and S4 never
/// retry: their names are free). It connects on first use (the warm-up).
pub(crate) fn manager(urls: &[String]) -> Result<LockManager, String> {
    let clients = urls
        .iter()
        .map(|url| redis::Client::open(url.as_str()).map_err(|e| format!("{url}: {e}")))
        .collect::<Result<Vec<_>, _>>()?;
    let mut manager = LockManager::from_clients(clients);
    manager.set_retry(RETRY_COUNT, RETRY_DELAY);
    Ok(manager)
}

/// One S1/S2/S4 cycle: `lock` then `release` of the free name `name`.
pub(crate) async fn cycle(manager: &LockManager, name: &str, ttl: Duration) -> Result<(), String> {
    let lock = manager.lock(name, ttl).await.map_err(|e| e.to_string())?;
    lock.release().await;
    Ok(())
}
