//! Helpers shared by the integration tests.

#![allow(dead_code, unreachable_pub)]

pub mod memory;
pub mod servers;
