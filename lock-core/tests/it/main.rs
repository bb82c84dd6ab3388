//! lock-core's integration tests, one binary (matklad's layout): a module per behaviour, the
//! controllable test backend in `common`. One binary links once; a file per test linked
//! lock-core and tokio once per file.
//!
//! Every test builds its own runtime (and paused clock) and its own lockers; the metrics tests
//! record through `metrics::with_local_recorder`, never a global recorder, so the modules share
//! the process without sharing state.

mod common;

mod adopt;
mod attempts;

mod coordination;
mod election;
mod handoff;
mod kinds;
mod lock_delay;
mod locker_waiting;
mod loss_watch;
mod memory_lock;
mod metrics;
mod multi;
mod names_fuzz;
mod oldest_held;
mod pacing;
mod reentrancy;
mod renewal;
mod revocation;
mod run;
mod runtimes;
mod spans;
mod stop_margin;
mod stop_on;
mod surface;
mod token_entropy;
mod waiters_by_name;
mod waiting_line;
