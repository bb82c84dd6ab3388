//! One clock for every process of the machine: `CLOCK_MONOTONIC` as a number of nanoseconds.
//! A replica stamps the start of its term with it and the parent the kill, so the failover time
//! is a difference on the monotonic clock, whatever the pipe between them took. (std's
//! `Instant` reads the same clock on Linux but cannot be sent to another process.)

use nix::time::{ClockId, clock_gettime};

/// Nanoseconds on `CLOCK_MONOTONIC` (0 if it cannot be read: never, on Linux).
pub(crate) fn now_ns() -> u64 {
    clock_gettime(ClockId::CLOCK_MONOTONIC).map_or(0, |t| {
        let secs = u64::try_from(t.tv_sec()).unwrap_or(0);
        let nanos = u64::try_from(t.tv_nsec()).unwrap_or(0);
        secs * 1_000_000_000 + nanos
    })
}
