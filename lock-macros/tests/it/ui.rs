//! Compile errors of `#[distributed_lock]`, each with its expected message and span in
//! `ui/*.stderr`. Regenerate after a deliberate change with `TRYBUILD=overwrite cargo test -p
//! lock-macros --test ui`, then review the diff.

#[test]
fn compile_errors() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/ui/*.rs");
}
