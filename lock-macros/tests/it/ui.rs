//! Compile errors of `#[distributed_lock]`, each with its expected message and span in
//! `tests/ui/*.stderr` (the cases stay in `tests/ui/`, a folder cargo does not take for a test
//! target; the path below is relative to the crate, where the test runs). Regenerate after a
//! deliberate change with `TRYBUILD=overwrite cargo test -p lock-macros --test it ui::`, then
//! review the diff.

#[test]
fn compile_errors() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/ui/*.rs");
}
