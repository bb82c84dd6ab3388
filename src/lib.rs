//! distlock (facade; docs come with the README).
pub use lock_core::*;
