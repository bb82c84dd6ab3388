//! The facade's integration tests in one binary (one to compile and link, not one per file):
//! `#[distributed_lock]`'s behaviour, one module per option or situation, most of them against
//! a `MemoryLock` and a real redis-server started for the test (`common`).
//!
//! The tests share one process and run on parallel threads, so none may depend on
//! process-wide state another test changes:
//! - the default locker (`set_default_locker`) is installed once, for good, by `runtimes`;
//!   `default_locker`, which checks that it starts absent, runs in a process of its own;
//! - metric assertions read thread-local recorders (`metrics::with_local_recorder`) on a
//!   current-thread runtime; no test installs a global recorder or a tracing subscriber.

mod common;

mod async_trait_methods;
mod default_locker;
mod exclusion;
mod instrument;
mod kinds;
mod lock_delay;
mod locker;
mod lost;
mod max_hold;
mod min_hold;
mod multi;
mod name;
mod reentrancy;
mod release;
mod rendered_names;
mod renew;
mod runtimes;
mod signature;
mod skip;
mod stop_on_shutdown;
mod template;
mod ttl;
mod ui;
mod wait;
