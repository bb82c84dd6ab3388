//! The conformance runners' way to the shared setup, which lives in `it/common/` (the one
//! integration-test binary's). Goes when the runners move into that binary.

#![allow(dead_code, unreachable_pub, unused_imports)]

#[path = "../it/common/mod.rs"]
mod shared;

pub use shared::*;
