//! Compile errors of `#[distributed_lock]`: each case in `tests/ui/*.rs` must fail to compile
//! with the message and spans in its `tests/ui/*.stderr` (the cases stay in `tests/ui/`, a
//! folder cargo does not take for a test target). After a deliberate change, regenerate the
//! expected output with `DISTLOCK_UI=overwrite cargo test -p distlock --test it ui::`, then
//! review the diff.
//!
//! Each case is one `rustc` call against the `distlock` library the test's own build made (the
//! newest `libdistlock-*.rlib` beside this test binary), type-checked only (`--emit=metadata`).
//! trybuild, used before, checks the dependencies again in a project of its own: ~90 s of CPU
//! on a fresh clone, a tenth of the test command's CPU on two cores, for 24 calls of ~0.2 s.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The environment variable that, set to `overwrite`, writes each case's output as its
/// expected output instead of comparing.
const OVERWRITE: &str = "DISTLOCK_UI";

/// Where the cases are, relative to the crate (where the test runs).
const CASES: &str = "tests/ui";

#[test]
fn compile_errors() {
    let deps = deps_dir();
    let facade = newest_rlib(&deps, "distlock");
    let out = tempfile::tempdir().expect("a scratch directory");
    let overwrite = std::env::var(OVERWRITE).is_ok_and(|v| v == "overwrite");
    let mut cases: Vec<PathBuf> = fs::read_dir(CASES)
        .expect("the cases' folder")
        .map(|entry| entry.expect("a case").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "rs"))
        .collect();
    cases.sort();
    assert!(!cases.is_empty(), "no case in {CASES}");
    let mut failed = Vec::new();
    for case in &cases {
        let actual = compile(case, &deps, &facade, out.path());
        let expected_path = case.with_extension("stderr");
        if overwrite {
            fs::write(&expected_path, &actual).expect("the expected output is written");
            continue;
        }
        let expected = fs::read_to_string(&expected_path).unwrap_or_default();
        if actual != expected {
            eprintln!(
                "== {}: expected\n{expected}\n== got\n{actual}",
                case.display()
            );
            failed.push(case.display().to_string());
        }
    }
    assert!(
        failed.is_empty(),
        "{} of {} cases did not fail as expected (output above; `{OVERWRITE}=overwrite` \
         regenerates): {failed:?}",
        failed.len(),
        cases.len()
    );
}

/// The folder of this test binary, `target/<profile>/deps`, which holds the libraries its build
/// made.
fn deps_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    exe.parent().expect("the binary's folder").to_path_buf()
}

/// The newest `lib{name}-*.rlib` in `deps`: the one this test binary's build made or left up to
/// date (another is from an earlier build with other features, and no newer).
fn newest_rlib(deps: &Path, name: &str) -> PathBuf {
    let prefix = format!("lib{name}-");
    fs::read_dir(deps)
        .expect("the deps folder")
        .filter_map(Result::ok)
        .filter(|entry| {
            let file = entry.file_name();
            let file = file.to_string_lossy();
            file.starts_with(&prefix) && file.ends_with(".rlib")
        })
        .max_by_key(|entry| entry.metadata().and_then(|m| m.modified()).ok())
        .map(|entry| entry.path())
        .unwrap_or_else(|| panic!("no lib{name}-*.rlib in {}", deps.display()))
}

/// Type-checks `case` against `facade` and answers its normalised error output; panics if it
/// compiles.
fn compile(case: &Path, deps: &Path, facade: &Path, out: &Path) -> String {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let krate = std::env::current_dir().expect("the crate's folder");
    let output = Command::new(rustc)
        .args(["--edition=2024", "--crate-type=bin", "--emit=metadata"])
        .args(["--color=never", "--cap-lints=warn"])
        .arg(format!("--remap-path-prefix={}/=", krate.display()))
        .arg("--out-dir")
        .arg(out)
        .arg("-L")
        .arg(format!("dependency={}", deps.display()))
        .arg("--extern")
        .arg(format!("distlock={}", facade.display()))
        .arg(krate.join(case))
        // From a folder where the library's recorded (workspace-relative) source paths do not
        // resolve: rustc then quotes no line of them, whose numbers move with every edit.
        .current_dir(out)
        .output()
        .expect("rustc runs");
    assert!(
        !output.status.success(),
        "{} compiled; it must not",
        case.display()
    );
    normalize(&String::from_utf8_lossy(&output.stderr))
}

/// rustc's output made independent of the checkout: paths into the workspace's other sources
/// as `$WORKSPACE/path`, without line and column, and rustc's closing summary dropped.
fn normalize(stderr: &str) -> String {
    let mut lines = Vec::new();
    for line in stderr.lines() {
        if line.starts_with("error: aborting due to")
            || line.starts_with("For more information about")
            || line.starts_with("Some errors have detailed explanations")
        {
            continue;
        }
        // `-->` starts a span's file, `:::` a further file of the same note.
        let located = ["--> ", "::: "]
            .into_iter()
            .find_map(|arrow| Some((arrow, line.split_once(arrow)?)));
        match located {
            Some((arrow, (indent, path))) if !path.starts_with(CASES) => {
                let path = path.split(':').next().unwrap_or(path);
                lines.push(format!("{indent}{arrow}$WORKSPACE/{path}"));
            }
            _ => lines.push(line.to_owned()),
        }
    }
    while lines.last().is_some_and(|line| line.is_empty()) {
        lines.pop();
    }
    let mut text = lines.join("\n");
    text.push('\n');
    text
}
