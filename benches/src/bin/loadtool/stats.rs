//! Latency summaries: nearest-rank percentiles over every sample (no histogram buckets).

use std::time::Duration;

use serde::Serialize;

/// Mean, median, 99th percentile and maximum of a set of durations, in microseconds.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub(crate) struct Latency {
    pub(crate) samples: usize,
    pub(crate) mean_us: f64,
    pub(crate) p50_us: f64,
    pub(crate) p99_us: f64,
    pub(crate) max_us: f64,
}

impl Latency {
    /// The summary of `samples` (nanoseconds; sorted in place). All zero when there are none.
    pub(crate) fn from_nanos(samples: &mut [u64]) -> Self {
        if samples.is_empty() {
            return Self::default();
        }
        samples.sort_unstable();
        let total: u128 = samples.iter().map(|&s| u128::from(s)).sum();
        let mean = total as f64 / samples.len() as f64;
        Self {
            samples: samples.len(),
            mean_us: mean / 1e3,
            p50_us: us(percentile(samples, 500)),
            p99_us: us(percentile(samples, 990)),
            max_us: us(samples[samples.len() - 1]),
        }
    }
}

/// The percentile `per_mille / 10` (nearest rank: 500 is the median, 990 the 99th) of sorted,
/// non-empty `sorted`.
pub(crate) fn percentile(sorted: &[u64], per_mille: usize) -> u64 {
    let n = sorted.len();
    let rank = (per_mille.min(1000) * n).div_ceil(1000).clamp(1, n.max(1));
    sorted[rank - 1]
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1e3
}

/// A duration in whole nanoseconds, saturating.
pub(crate) fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// Serializes a duration as (fractional) seconds.
pub(crate) fn secs<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

/// `part / whole`, or 0 when `whole` is 0.
pub(crate) fn ratio(part: f64, whole: f64) -> f64 {
    if whole > 0.0 { part / whole } else { 0.0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let mut v: Vec<u64> = (1..=100).map(|i| i * 1000).collect();
        let l = Latency::from_nanos(&mut v);
        assert_eq!(l.samples, 100);
        assert!((l.p50_us - 50.0).abs() < 1e-9);
        assert!((l.p99_us - 99.0).abs() < 1e-9);
        assert!((l.max_us - 100.0).abs() < 1e-9);
        assert!((l.mean_us - 50.5).abs() < 1e-9);
        assert_eq!(percentile(&[7], 990), 7);
        assert_eq!(percentile(&[1, 2], 500), 1);
        assert_eq!(percentile(&[1, 2], 990), 2);
    }

    #[test]
    fn empty_is_zero() {
        assert_eq!(Latency::from_nanos(&mut []), Latency::default());
        assert!(ratio(1.0, 0.0).abs() < f64::EPSILON);
    }
}
