//! Percentiles and how the demo prints durations.

/// The `p`-th percentile (nearest rank) of `samples`, which need not be sorted; `None` when
/// there are none.
pub(crate) fn percentile(samples: &[u64], p: usize) -> Option<u64> {
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();
    let rank = (p * sorted.len())
        .div_ceil(100)
        .clamp(1, sorted.len().max(1));
    sorted.get(rank - 1).copied()
}

/// Microseconds as milliseconds with two decimals, rounded half up: `1234` → `"1.23"`.
pub(crate) fn ms(us: u64) -> String {
    let hundredths = us.saturating_add(5) / 10;
    format!("{}.{:02}", hundredths / 100, hundredths % 100)
}

/// [`ms`] of an optional value, `-` when there is none.
pub(crate) fn ms_or_dash(us: Option<u64>) -> String {
    us.map_or_else(|| "-".to_owned(), ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank() {
        assert_eq!(percentile(&[], 50), None);
        assert_eq!(percentile(&[7], 50), Some(7));
        assert_eq!(percentile(&[7], 99), Some(7));
        let hundred: Vec<u64> = (1..=100).rev().collect();
        assert_eq!(percentile(&hundred, 50), Some(50));
        assert_eq!(percentile(&hundred, 99), Some(99));
        assert_eq!(percentile(&hundred, 100), Some(100));
        assert_eq!(percentile(&[1, 2, 3], 50), Some(2));
    }

    #[test]
    fn milliseconds() {
        assert_eq!(ms(0), "0.00");
        assert_eq!(ms(4), "0.00");
        assert_eq!(ms(5), "0.01");
        assert_eq!(ms(1_234), "1.23");
        assert_eq!(ms(700_999), "701.00");
        assert_eq!(ms_or_dash(None), "-");
    }
}
