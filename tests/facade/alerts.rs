//! The alert rules and the Grafana dashboard of the axum example name only series that exist:
//! a misspelt name is valid PromQL (`promtool check rules` passes it) that never matches.

use std::collections::BTreeSet;

use crate::metrics::listed;
use crate::source::read;

/// The series `distlock serve` exports from the store: not recorded by a library crate, so not
/// in `distlock::metrics`.
const STORE_SERIES: &[&str] = &["distlock_store_oldest_held_seconds"];

/// Every `distlock_…` series named in `text`, a histogram's `_bucket`, `_count` and `_sum`
/// series under the histogram's name.
fn named(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("distlock_") {
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'))
            .unwrap_or(tail.len());
        let name = &tail[..end];
        let name = ["_bucket", "_count", "_sum"]
            .iter()
            .find_map(|suffix| name.strip_suffix(suffix))
            .unwrap_or(name);
        // `distlock_` inside a longer word is no series, nor a pattern (`distlock_*_seconds`).
        let word_start = at == 0 || !rest.as_bytes()[at - 1].is_ascii_alphanumeric();
        if word_start && !name.ends_with('_') {
            names.insert(name.to_owned());
        }
        rest = &tail[end..];
    }
    names
}

#[test]
fn the_alerts_and_the_dashboard_name_existing_series() {
    let known = listed();
    for file in [
        "examples/axum_service/alerts.yml",
        "examples/axum_service/alerts.test.yml",
        "examples/axum_service/grafana/dashboard.json",
    ] {
        let names = named(&read(file));
        assert!(!names.is_empty(), "{file} names no series");
        let unknown: Vec<_> = names
            .iter()
            .filter(|name| !known.contains(*name) && !STORE_SERIES.contains(&name.as_str()))
            .collect();
        assert!(
            unknown.is_empty(),
            "{file} names series nothing records: {unknown:?}"
        );
    }
    let alerts = named(&read("examples/axum_service/alerts.yml"));
    for wanted in [
        "distlock_oldest_held_seconds",
        "distlock_store_oldest_held_seconds",
        "distlock_acquire_wait_seconds",
        "distlock_at_risk_total",
        "distlock_eviction_risk_total",
    ] {
        assert!(alerts.contains(wanted), "no alert on {wanted}");
    }
}
