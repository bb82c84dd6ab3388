//! The docs.rs front page's feature table names every feature of the facade, and marks the
//! default ones.

use std::collections::BTreeSet;

use crate::source::read;

/// The facade's features from its Cargo.toml, and the default ones.
fn cargo_features() -> (BTreeSet<String>, BTreeSet<String>) {
    let manifest = read("Cargo.toml");
    let section = manifest
        .split("\n[features]\n")
        .nth(1)
        .expect("Cargo.toml has a [features] table")
        .split("\n[")
        .next()
        .unwrap_or_default();
    let mut features = BTreeSet::new();
    let mut defaults = BTreeSet::new();
    for line in section.lines().filter(|l| !l.trim_start().starts_with('#')) {
        let Some((name, value)) = line.split_once('=') else {
            continue;
        };
        let name = name.trim();
        if name == "default" {
            defaults = value
                .split('"')
                .skip(1)
                .step_by(2)
                .map(str::to_owned)
                .collect();
        } else if !name.is_empty() {
            features.insert(name.to_owned());
        }
    }
    (features, defaults)
}

/// The feature table of `src/docs/crate.md`: every row whose first cell is one backticked
/// word, with whether its last cell says `yes` (a default feature).
fn page_features() -> (BTreeSet<String>, BTreeSet<String>) {
    let page = read("src/docs/crate.md");
    let table = page
        .split("| feature | what it adds | default |")
        .nth(1)
        .expect("src/docs/crate.md has the feature table");
    let mut features = BTreeSet::new();
    let mut defaults = BTreeSet::new();
    for row in table.lines().skip(2).take_while(|l| l.starts_with('|')) {
        let cells: Vec<&str> = row.trim_matches('|').split(" | ").map(str::trim).collect();
        let name = cells[0].trim_matches('`').to_owned();
        if cells.last() == Some(&"yes") {
            defaults.insert(name.clone());
        }
        features.insert(name);
    }
    (features, defaults)
}

#[test]
fn the_front_page_lists_every_feature() {
    let (features, defaults) = cargo_features();
    let (page, page_defaults) = page_features();
    assert!(
        features.contains("etcd") && defaults.contains("redis"),
        "{features:?}"
    );
    assert_eq!(
        page, features,
        "src/docs/crate.md's feature table and Cargo.toml's [features] differ"
    );
    assert_eq!(
        page_defaults, defaults,
        "src/docs/crate.md's `default` column and Cargo.toml's default features differ"
    );
}
