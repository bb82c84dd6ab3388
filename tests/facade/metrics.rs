//! `distlock::metrics` lists every series a crate of the workspace records.

use std::collections::BTreeSet;
use std::path::Path;

use crate::source::{read, root};

/// Constants whose value starts with `distlock_` but that name no series: lock-core's prefix
/// and lock-postgres's tables (the leases', the fences') and notification channels.
const NOT_SERIES: &[&str] = &["PREFIX", "TABLE", "FENCE_TABLE", "CHANNEL", "TURN_CHANNEL"];

/// The crates whose sources may define series.
const CRATES: &[&str] = &[
    "lock-core",
    "lock-redis",
    "lock-redlock",
    "lock-postgres",
    "lock-etcd",
    "distlock-cli",
];

/// Every `const NAME: &str = "distlock_…";` under `dir`: (file, const name, value).
fn series_constants(dir: &Path, found: &mut Vec<(String, String, String)>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            series_constants(&path, found);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let text = std::fs::read_to_string(&path).expect("a source file");
            for line in text.lines() {
                let Some((head, value)) = line.split_once(": &str = \"distlock_") else {
                    continue;
                };
                let Some(name) = head.trim().rsplit(' ').next() else {
                    continue;
                };
                let value = format!("distlock_{}", value.trim_end_matches("\";"));
                found.push((path.display().to_string(), name.to_owned(), value));
            }
        }
    }
}

/// The series named in the first column of `src/docs/metrics.md`'s table.
pub(crate) fn listed() -> BTreeSet<String> {
    read("src/docs/metrics.md")
        .lines()
        .filter_map(|line| line.strip_prefix("| `distlock_"))
        .map(|rest| format!("distlock_{}", rest.split('`').next().unwrap_or_default()))
        .collect()
}

#[test]
fn the_metrics_module_lists_every_series_of_every_crate() {
    let mut found = Vec::new();
    for krate in CRATES {
        series_constants(&root().join(krate).join("src"), &mut found);
    }
    let defined: BTreeSet<String> = found
        .iter()
        .filter(|(_, name, _)| !NOT_SERIES.contains(&name.as_str()))
        .map(|(_, _, value)| value.clone())
        .collect();
    assert!(defined.len() >= 20, "too few series found: {defined:?}");
    let listed = listed();
    let missing: Vec<_> = defined.difference(&listed).collect();
    let stale: Vec<_> = listed.difference(&defined).collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "src/docs/metrics.md (distlock::metrics) misses the series {missing:?} and lists {stale:?}, \
         which no crate defines"
    );
}

/// The facade's names for the series are the crates' constants.
#[test]
fn the_metrics_module_reexports_the_constants() {
    use distlock::metrics;
    assert_eq!(metrics::ACQUIRED_TOTAL, "distlock_acquired_total");
    assert_eq!(metrics::redis::GRACE_SECONDS, "distlock_grace_seconds");
    assert_eq!(metrics::redlock::QUORUM, "distlock_redlock_quorum_total");
    assert!(listed().contains(metrics::redis::EVICTION_RISK_TOTAL));
}
