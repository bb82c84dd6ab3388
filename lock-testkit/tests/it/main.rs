//! lock-testkit's integration tests, one binary (matklad's layout): a module per launcher or
//! tool, each against the real `redis-server`, `initdb`/`postgres` binaries. Every test starts
//! its own servers on free loopback ports and stops them by PID, so the modules share the
//! process, never a server.

mod common;

mod cluster;
mod conformance;
mod etcd;
mod postgres;
mod proxy;
mod sentinel;
mod server;
#[cfg(feature = "tls")]
mod tls;
