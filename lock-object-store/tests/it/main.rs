//! lock-object-store's integration tests, one binary: a module per behaviour. The S3 tests
//! share one SeaweedFS server per test process (lock-testkit's `SeaweedfsServer`, on free
//! loopback ports, stopped by its PID); the rest run on `object_store`'s in-memory store or an
//! in-process fake.

mod common;

mod conformance;
mod election_processes;
mod errors;
mod faults;
mod first_grant;
mod lost_answer;
