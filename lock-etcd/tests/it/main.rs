//! lock-etcd's integration tests, one binary (matklad's layout): a module per behaviour. Every
//! test starts its own etcd members on free loopback ports through lock-testkit's
//! `EtcdCluster` and stops them by PID.

mod common;

mod basics;
mod conformance;
mod coordination_processes;
mod election_processes;
mod errors;
mod faults;
mod fence;
mod fixed_lease;
mod held;
mod holder_notes;
mod inspect;
mod recovery;
mod shared_lease;
