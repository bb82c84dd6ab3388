//! How long a waiter sleeps between attempts.

use std::time::Duration;

/// Exponential backoff with full jitter (AWS Architecture Blog, "Exponential Backoff And
/// Jitter", 2015): before attempt *n + 1* a waiter sleeps a uniformly random time in
/// `[0, min(max, initial · 2^(n−1))]`, so competing waiters spread out instead of retrying in
/// lock step.
///
/// The [`Locker`](crate::Locker) also caps every sleep at the holder's remaining TTL (at least
/// 1 ms, the backend's resolution), so a waiter is never asleep when a lease expires unseen,
/// and at the time left before the caller's deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    initial: Duration,
    max: Duration,
}

impl Backoff {
    /// Backoff starting at `initial` and doubling up to `max` (both clamped to at least 1 µs,
    /// and `max` to at least `initial`).
    #[must_use]
    pub fn new(initial: Duration, max: Duration) -> Self {
        let initial = initial.max(Duration::from_micros(1));
        Self {
            initial,
            max: max.max(initial),
        }
    }

    /// The upper bound of the sleep after `attempt` failed attempts (1-based).
    #[must_use]
    pub fn ceiling(&self, attempt: u32) -> Duration {
        let doublings = attempt.saturating_sub(1).min(31);
        self.initial
            .checked_mul(1_u32 << doublings)
            .map_or(self.max, |d| d.min(self.max))
    }

    /// The sleep before the next attempt: full jitter under [`Backoff::ceiling`], capped at the
    /// holder's remaining TTL (at least 1 ms) and at `left` before the caller's deadline.
    #[must_use]
    pub fn delay(&self, attempt: u32, holder_ttl: Option<Duration>, left: Duration) -> Duration {
        let ceiling = self.ceiling(attempt);
        // u64 nanoseconds cover 584 years; `max` is small in practice.
        let ceiling_ns = u64::try_from(ceiling.as_nanos()).unwrap_or(u64::MAX);
        let jittered = Duration::from_nanos(fastrand::u64(0..=ceiling_ns));
        let ttl_cap = holder_ttl.map_or(Duration::MAX, |t| t.max(Duration::from_millis(1)));
        jittered.min(ttl_cap).min(left)
    }
}

impl Default for Backoff {
    /// 1 ms doubling up to 100 ms.
    fn default() -> Self {
        Self::new(Duration::from_millis(1), Duration::from_millis(100))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn ceiling_doubles_then_caps() {
        let b = Backoff::new(MS, 100 * MS);
        let ceilings: Vec<_> = (1..=9).map(|a| b.ceiling(a)).collect();
        assert_eq!(ceilings, [1, 2, 4, 8, 16, 32, 64, 100, 100].map(|n| n * MS));
        assert_eq!(b.ceiling(u32::MAX), 100 * MS);
    }

    #[test]
    fn delay_stays_under_every_cap() {
        let b = Backoff::new(MS, 100 * MS);
        for attempt in 1..40 {
            for _ in 0..50 {
                let d = b.delay(attempt, None, Duration::MAX);
                assert!(d <= b.ceiling(attempt));
                assert!(b.delay(attempt, Some(3 * MS), Duration::MAX) <= 3 * MS);
                assert!(b.delay(attempt, Some(Duration::ZERO), Duration::MAX) <= MS);
                assert!(b.delay(attempt, None, 2 * MS) <= 2 * MS);
                assert_eq!(b.delay(attempt, None, Duration::ZERO), Duration::ZERO);
            }
        }
    }

    #[test]
    fn delay_is_jittered() {
        // Full jitter: draws at a 100 ms ceiling spread over the range, not one value.
        let b = Backoff::new(100 * MS, 100 * MS);
        let draws: Vec<_> = (0..200).map(|_| b.delay(1, None, Duration::MAX)).collect();
        assert!(draws.iter().any(|d| *d < 30 * MS));
        assert!(draws.iter().any(|d| *d > 70 * MS));
    }
}
