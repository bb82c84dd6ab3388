//! The workspace's declared `rust-version` against every dependency's own: no older toolchain
//! can be installed here to build with, so a dependency that needs a newer Rust than the one
//! the crates declare is caught from the metadata instead.

use std::process::Command;

use crate::source::{read, root};

/// `"1.88"` or `"1.88.0"` as (major, minor, patch).
fn version(text: &str) -> (u64, u64, u64) {
    let mut parts = text
        .split('.')
        .map(|p| p.parse::<u64>().expect("a numeric version"));
    let mut next = || parts.next().unwrap_or(0);
    (next(), next(), next())
}

/// The `rust-version` of `[workspace.package]`.
fn declared() -> String {
    let manifest = read("Cargo.toml");
    let line = manifest
        .lines()
        .find(|l| l.starts_with("rust-version = "))
        .expect("[workspace.package] declares rust-version");
    line.split('"').nth(1).expect("a quoted version").to_owned()
}

#[test]
fn no_dependency_needs_a_newer_rust_than_the_workspace_declares() {
    let declared = declared();
    assert_eq!(
        declared,
        env!("CARGO_PKG_RUST_VERSION"),
        "the facade inherits the workspace's"
    );
    // Every package of the lock file, whatever the platform or the kind of dependency (a
    // dev-dependency too: the tests must build with the declared Rust).
    let output = Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--locked"])
        .current_dir(root())
        .output()
        .expect("cargo metadata runs");
    assert!(
        output.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let metadata: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("cargo metadata prints JSON");
    let packages = metadata["packages"].as_array().expect("a package list");
    assert!(packages.len() > 100, "too few packages: {}", packages.len());
    let too_new: Vec<String> = packages
        .iter()
        .filter_map(|p| {
            let needs = p["rust_version"].as_str()?;
            (version(needs) > version(&declared))
                .then(|| format!("{} {} needs Rust {needs}", p["name"], p["version"]))
        })
        .collect();
    assert!(
        too_new.is_empty(),
        "the workspace declares rust-version {declared}, but {too_new:#?}"
    );
}

#[test]
fn versions_compare_by_number() {
    assert!(version("1.88.0") == version("1.88"));
    assert!(version("1.100") > version("1.88"));
    assert!(version("1.88.1") > version("1.88"));
}
