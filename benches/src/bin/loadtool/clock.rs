//! A clock all the processes of the machine share, for S10's timestamps: `CLOCK_MONOTONIC`
//! read as a number of nanoseconds. It is one clock for the whole system (the time since boot,
//! never stepped), so a grant stamped in one process and a release stamped in another can be
//! subtracted. std's `Instant` reads the same clock on Linux but does not show its value, so
//! an `Instant` cannot travel to another process; this can.

use std::time::Duration;

use nix::time::{ClockId, clock_gettime};

/// Nanoseconds on `CLOCK_MONOTONIC`; 0 if the clock cannot be read (never, on Linux).
pub(crate) fn now_ns() -> u64 {
    clock_gettime(ClockId::CLOCK_MONOTONIC).map_or(0, |t| {
        let secs = u64::try_from(t.tv_sec()).unwrap_or(0);
        let nanos = u64::try_from(t.tv_nsec()).unwrap_or(0);
        secs * 1_000_000_000 + nanos
    })
}

/// A duration from now on the shared clock.
pub(crate) fn after(d: Duration) -> u64 {
    now_ns() + crate::stats::nanos(d)
}

/// Sleeps until `ns` on the shared clock (at once if it has passed).
pub(crate) async fn sleep_until(ns: u64) {
    tokio::time::sleep(Duration::from_nanos(ns.saturating_sub(now_ns()))).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shared_clock_moves_with_instant() {
        let (ns0, i0) = (now_ns(), std::time::Instant::now());
        std::thread::sleep(Duration::from_millis(20));
        let (ns1, i1) = (now_ns(), std::time::Instant::now());
        let ours = ns1 - ns0;
        let std_ns = crate::stats::nanos(i1 - i0);
        assert!(ours >= 20_000_000);
        assert!(ours.abs_diff(std_ns) < 1_000_000, "{ours} vs {std_ns}");
    }
}
