//! lock-mysql's integration tests, one binary: a module per behaviour, the shared setup (a
//! throwaway MariaDB shared by the tests that do not stop it, a migrated lock) in `common`.
//! Servers are started through lock-testkit and stopped by their PID.

mod common;

mod advisory_loss;
mod conformance;
mod coordination_processes;
mod election_processes;
mod errors;
mod fenced_write;
mod inspect;
mod restart;
