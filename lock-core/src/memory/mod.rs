//! An in-process backend with the same semantics as the Redis one, laid out as every backend
//! is: `memory_lock.rs` holds the type and its one `impl Lock`, which dispatches on the kind;
//! `kinds/` holds one attempt per kind, free functions over the `store`.

mod inspect;
mod kinds;
mod memory_lock;
mod store;

pub use memory_lock::MemoryLock;
