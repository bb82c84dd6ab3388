//! lock-postgres's integration tests, one binary (matklad's layout): a module per behaviour,
//! the shared setup (a throwaway server, a migrated lock, a raw client) in `common`. Every test
//! starts its own PostgreSQL (initdb in a temporary directory, a free loopback port) through
//! lock-testkit and stops it by PID, so the modules share the process, never a server.
//!
//! `conformance` runs every check of lock-testkit's conformance suite over the lease table,
//! the advisory mode and the lease table behind PgBouncer, from their capability tables.

mod common;

mod advisory;
mod advisory_interop;
mod cancel_acquire;
mod conformance;
mod coordination_processes;
mod election_processes;
mod exclusion_tasks;
mod expiry;
mod extend_many;
mod fair_processes;
mod fence;
mod fence_processes;
mod fencing_restart;
mod held_since;
mod kinds_processes;
mod lifecycle;
mod missing_table;
mod pgbouncer;
mod postgres_down;
mod postgres_slow;
mod runtimes;
mod statement_timeout;
mod wakeup;
mod wrong_password;
