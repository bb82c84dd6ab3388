//! Every backend is named wherever the documents list the backends: the README's backend
//! chooser, the crate docs' module list, `distlock-cli`'s subcommand × backend table,
//! VERIFICATION.md's conformance matrix and the metrics page (issue 48: MySQL and object
//! storage were left out of several such lists when they came).
//!
//! The backends are read from the sources, not listed here: a facade feature is a backend's
//! when it pulls in (`dep:`) a crate whose `lib.rs` calls `lock_core::backend_exports!`, whose
//! `lock:` entry names the lock type; its module is the `pub mod` that `src/lib.rs` declares
//! under that feature. The seventh backend, `MemoryLock`, is lock-core's and always there.

use std::collections::BTreeMap;

use crate::source::{read, root, strip_comments};

/// One backend as the documents must name it.
#[derive(Debug)]
struct Backend {
    /// The facade feature that pulls it in; `None` for lock-core's `MemoryLock`.
    feature: Option<String>,
    /// Its module in the facade (`distlock::<module>`), if it has one.
    module: Option<String>,
    /// Its lock type, as `backend_exports!` names it (`MysqlLock`).
    lock: String,
}

/// What the store behind a backend feature is called in `distlock-cli/README.md`'s backend
/// table, whose columns are stores, not types. A new backend feature fails
/// [`every_backend_is_in_every_list`] until it has an entry here.
const STORE_NAMES: &[(&str, &str)] = &[
    ("redis", "Redis"),
    ("redlock", "Redlock"),
    ("postgres", "PostgreSQL"),
    ("mysql", "MySQL"),
    ("etcd", "etcd"),
    ("object-store", "object storage"),
];

/// The facade's `[features]` table: each feature with the entries of its list.
fn features() -> BTreeMap<String, Vec<String>> {
    let manifest = read("Cargo.toml");
    let section = manifest
        .split("\n[features]\n")
        .nth(1)
        .expect("Cargo.toml has a [features] table")
        .split("\n[")
        .next()
        .unwrap_or_default();
    section
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .filter_map(|line| line.split_once('='))
        .map(|(name, value)| {
            let entries = value
                .split('"')
                .skip(1)
                .step_by(2)
                .map(str::to_owned)
                .collect();
            (name.trim().to_owned(), entries)
        })
        .collect()
}

/// The lock type a backend crate's `lib.rs` names in `backend_exports! { lock: path::Type, .. }`,
/// or `None` when the crate is no backend (no such call; lock-macros, for one).
fn backend_lock_type(krate: &str) -> Option<String> {
    let lib = root().join(krate).join("src/lib.rs");
    let text = strip_comments(&std::fs::read_to_string(lib).ok()?);
    let call = text.split("backend_exports!").nth(1)?;
    let (_, entry) = call.split_once("lock:")?;
    let path = entry.split(',').next()?.trim();
    Some(path.rsplit("::").next()?.trim().to_owned())
}

/// The `pub mod` that `src/lib.rs` declares under `#[cfg(feature = "<feature>")]`.
fn module_of(feature: &str) -> Option<String> {
    let lib = read("src/lib.rs");
    let lines: Vec<&str> = lib.lines().collect();
    let cfg = format!("#[cfg(feature = \"{feature}\")]");
    lines.iter().enumerate().find_map(|(i, line)| {
        (line.trim() == cfg).then(|| {
            lines[i + 1..]
                .iter()
                .take(3)
                .find_map(|l| l.trim().strip_prefix("pub mod "))
                .map(|m| m.trim_end_matches(';').trim().to_owned())
        })?
    })
}

/// Every backend: one per feature that pulls in a backend crate, and `MemoryLock`.
fn backends() -> Vec<Backend> {
    let mut backends: Vec<Backend> = features()
        .into_iter()
        .filter_map(|(feature, entries)| {
            let lock = entries
                .iter()
                .filter_map(|e| e.strip_prefix("dep:"))
                .find_map(backend_lock_type)?;
            let module = module_of(&feature);
            Some(Backend {
                feature: Some(feature),
                module,
                lock,
            })
        })
        .collect();
    assert!(
        strip_comments(&read("lock-core/src/lib.rs")).contains("MemoryLock"),
        "lock-core no longer exports MemoryLock: say here which in-process backend the documents list"
    );
    backends.push(Backend {
        feature: None,
        module: None,
        lock: "MemoryLock".to_owned(),
    });
    backends
}

/// The text of `page` from the line `heading` to the next heading of the same or a higher level.
fn section(page: &str, text: &str, heading: &str) -> String {
    let level = heading.split(' ').next().unwrap_or_default();
    let start = text
        .lines()
        .position(|l| l.trim_end() == heading)
        .unwrap_or_else(|| panic!("{page} has no heading {heading:?}"));
    text.lines()
        .skip(start + 1)
        .take_while(|l| {
            let hashes = l.chars().take_while(|&c| c == '#').count();
            !(hashes > 0 && hashes <= level.len() && l[hashes..].starts_with(' '))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The body rows of the first Markdown table in `text`, each split into its cells.
fn table_rows(text: &str) -> Vec<Vec<String>> {
    text.lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .skip(2)
        .map(|l| {
            l.trim()
                .trim_matches('|')
                .split('|')
                .map(|c| c.trim().to_owned())
                .collect()
        })
        .collect()
}

#[test]
fn the_backends_are_read_from_the_sources() {
    let backends = backends();
    let locks: Vec<&str> = backends.iter().map(|b| b.lock.as_str()).collect();
    // The seven of issue 48; a new backend adds itself here by its feature and its type.
    for lock in [
        "RedisLock",
        "Redlock",
        "PostgresLock",
        "MysqlLock",
        "EtcdLock",
        "ObjectStoreLock",
        "MemoryLock",
    ] {
        assert!(
            locks.contains(&lock),
            "{lock} not found among the backends {backends:#?}"
        );
    }
    for backend in backends.iter().filter(|b| b.feature.is_some()) {
        assert!(
            backend.module.is_some(),
            "no `pub mod` in src/lib.rs for {backend:?}"
        );
    }
}

#[test]
fn every_backend_is_in_every_list() {
    let backends = backends();
    let mut missing: Vec<String> = Vec::new();

    // The README's backend chooser: a row naming the lock type, whose feature cell names the
    // feature.
    let readme = read("README.md");
    let chooser = table_rows(&section("README.md", &readme, "## Choosing a backend"));
    for b in &backends {
        let found = chooser.iter().any(|row| {
            row.iter().any(|cell| cell.contains(&b.lock))
                && b.feature.as_ref().is_none_or(|f| {
                    row.get(1)
                        .is_some_and(|cell| cell.contains(&format!("`{f}`")))
                })
        });
        if !found {
            missing.push(format!(
                "README.md's backend chooser (## Choosing a backend) has no row for {} (feature {:?})",
                b.lock, b.feature
            ));
        }
    }

    // The crate docs' module list: the paragraph that begins "Each backend has its module".
    let crate_md = read("src/docs/crate.md");
    let modules = crate_md
        .split("\n\n")
        .find(|p| p.trim_start().starts_with("Each backend has its module"))
        .expect("src/docs/crate.md has the paragraph \"Each backend has its module …\"");
    for b in &backends {
        let unlinked = b
            .module
            .as_ref()
            .filter(|m| !modules.contains(&format!("[`{m}`]")));
        if let Some(module) = unlinked {
            missing.push(format!(
                "src/docs/crate.md's module list does not link the module [`{module}`]"
            ));
        }
        if !modules.contains(&format!("`{}`", b.lock))
            && !modules.contains(&format!("[`{}`]", b.lock))
        {
            missing.push(format!(
                "src/docs/crate.md's module list does not name `{}`",
                b.lock
            ));
        }
    }

    // distlock-cli's subcommand × backend table: its header names every store the command
    // reaches, which is every backend but the in-process one (no other process sees it).
    let cli = read("distlock-cli/README.md");
    let header = cli
        .lines()
        .find(|l| l.starts_with("| subcommand |"))
        .expect("distlock-cli/README.md has the subcommand × backend table");
    for b in &backends {
        let Some(feature) = &b.feature else { continue };
        let Some((_, store)) = STORE_NAMES.iter().find(|(f, _)| f == feature) else {
            missing.push(format!(
                "tests/facade/backends.rs's STORE_NAMES has no store name for the backend feature `{feature}`"
            ));
            continue;
        };
        if !header.contains(store) {
            missing.push(format!(
                "distlock-cli/README.md's subcommand × backend table has no column for {store} ({})",
                b.lock
            ));
        }
    }

    // VERIFICATION.md's conformance matrix: a row whose first cell names the lock type.
    let verification = read("VERIFICATION.md");
    let matrix = table_rows(&section(
        "VERIFICATION.md",
        &verification,
        "### 3.1 Every backend and kind: the conformance suite",
    ));
    for b in &backends {
        let lock = format!("`{}`", b.lock);
        if !matrix
            .iter()
            .any(|row| row.first().is_some_and(|c| c.contains(&lock)))
        {
            missing.push(format!(
                "VERIFICATION.md's conformance matrix (§3.1) has no row for {lock}"
            ));
        }
    }

    // The metrics page says, for every backend, which series it records.
    let metrics = read("src/docs/metrics.md");
    for b in &backends {
        if !metrics.contains(&format!("`{}`", b.lock)) {
            missing.push(format!("src/docs/metrics.md does not name `{}`", b.lock));
        }
    }

    assert!(
        missing.is_empty(),
        "backends missing from the documents:\n{}",
        missing.join("\n")
    );
}
