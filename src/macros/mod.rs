//! The runtime side of `#[distributed_lock]` (feature `macros`): the process-wide default
//! locker, the current lease of a locked function, and the hidden support its expansion calls.

mod current;
mod default_locker;
pub mod support;

pub use current::{current_lease, current_leases};
pub use default_locker::{default_locker, set_default_locker, take_default_locker};
