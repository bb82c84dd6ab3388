//! lock-redis's integration tests, one binary (matklad's layout): one module per behaviour,
//! the shared setup in `common`. Every test starts its own redis-server (or cluster, Sentinel
//! set, TLS server) through lock-testkit on a free loopback port and stops it by its PID.
//!
//! One binary instead of one per file: each test file used to compile and link on its own,
//! which made most of the test run's time.

mod common;

mod acl;
mod bad_input;
mod bad_input_suite;
mod cancel_acquire;
mod cluster;
mod conformance;
mod coordination_processes;
mod election_processes;
mod exclusion;
mod expiry;
mod fair;
mod fair_faults;
mod fair_processes;
mod fence;
mod fence_cost;
#[cfg(feature = "cluster")]
mod fence_deploys;
mod fencing;
mod foreign_holder;
mod grace;
mod handoff;
mod holder_metadata;
mod holder_notes;
mod interop;
mod kinds_layout;
mod kinds_processes;
mod layout;
mod loss_tracking;
mod lost_signal;
mod multi;
mod native;
mod redis_down;
mod renewal;
mod replication;
mod runtimes;
mod script_flush;
mod sentinel;
mod stale_holder;
mod stop_margin;
mod subscriber_ping;
mod tls;
mod unfenced;
mod wakeups;
mod wrong_type;
