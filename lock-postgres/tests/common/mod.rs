//! The conformance runners beside `it/` (`mutex_conformance.rs`, `kinds.rs`) still build as
//! binaries of their own; they reach the one shared setup, `it/common.rs`, through this bridge.
//! It goes when they move into `it/`.

#[path = "../it/common.rs"]
mod shared;

#[allow(unused_imports)]
pub(crate) use shared::*;
