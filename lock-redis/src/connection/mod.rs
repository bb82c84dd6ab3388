//! Where Redis is and how a lock reaches it: the builder's connection settings (`source`), one
//! pooled connection kept while it works (`conn`), the wait for replicas after a write on it
//! (`replication`), TLS (`tls`, feature `tls`).

pub(crate) mod conn;
pub(crate) mod replication;
pub(crate) mod source;
#[cfg(feature = "tls")]
pub(crate) mod tls;
