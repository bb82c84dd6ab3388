//! Compile errors of `#[distributed_lock]`, each with its expected message and span in
//! `tests/ui/*.stderr` (the cases stay in `tests/ui/`, a folder cargo does not take for a test
//! target; the path below is relative to the crate, where the test runs). Regenerate after a
//! deliberate change with `TRYBUILD=overwrite cargo test -p lock-macros --test it ui::`, then
//! review the diff.

use std::process::Command;

/// The environment through which `scripts/test.sh` has cargo run clippy-driver (clippy's
/// lints, warnings denied) on the workspace's crates. trybuild's own cargo would inherit it
/// and lint the cases too: their expected output is rustc's alone.
const CLIPPY_IN_BUILD: [&str; 2] = ["RUSTC_WORKSPACE_WRAPPER", "CLIPPY_ARGS"];

#[test]
fn compile_errors() {
    if CLIPPY_IN_BUILD
        .iter()
        .any(|var| std::env::var_os(var).is_some())
    {
        // The test runs again in a process of its own without those variables (changing this
        // process's environment would be `unsafe`: other test threads may read it).
        let exe = std::env::current_exe().expect("the test binary");
        let mut again = Command::new(exe);
        again.args([
            "ui::compile_errors",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ]);
        for var in CLIPPY_IN_BUILD {
            again.env_remove(var);
        }
        let status = again.status().expect("the test binary runs");
        assert!(status.success(), "the compile-error cases: {status}");
        return;
    }
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/ui/*.rs");
}
