//! lock-macros' integration tests in one binary (one to compile and link, not one per file):
//! the compile errors of `#[distributed_lock]` (`ui`: rustc over `tests/ui/*.rs`, which
//! stays where it was) and the lock names it renders at run time (`rendered_names`).

mod rendered_names;
mod ui;
