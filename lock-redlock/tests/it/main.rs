//! lock-redlock's integration tests, one binary (matklad's layout): one module per behaviour,
//! the shared setup in `common` (`common::servers`: real redis-server nodes through
//! lock-testkit; `common::memory`: scripted in-memory nodes on a paused clock).
//!
//! One binary instead of one per file: each test file used to compile and link on its own,
//! which made most of the test run's time.

mod common;

mod back_to_back;
mod back_to_back_all_nodes;
mod builder;
mod conformance;
mod election_processes;
mod exclusion;
mod extend_minority_gone;
mod extend_release_memory;
mod extend_repair;
mod extend_repair_memory;
mod fencing;
mod fencing_memory;
mod grace;
mod lagging_nodes_memory;
mod lifecycle;
mod locker_memory;
mod metrics;
mod node_killed;
mod node_restarted_empty;
mod nodes_paused;
mod observers;
mod quorum_lost;
mod quorum_memory;
mod release_then_acquire_memory;
mod release_waits_for_all;
mod stragglers_memory;
mod ttl_edges;
mod wakeups;
mod watch_memory;
