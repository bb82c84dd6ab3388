//! The kinds of lock on etcd, one file each: which transaction each operation sends, on which
//! keys ([`layout`](crate::layout)), and what its answer means. Each is a set of functions over
//! the [`Executor`](crate::executor::Executor), which sends the requests; `EtcdLock`'s
//! `impl Lock` picks the kind. The layouts are in the crate README ("The semaphore", "The
//! read-write lock", "The fair lock", "Holder descriptions") and in each file's header.

pub(crate) mod fair;
pub(crate) mod multi;
pub(crate) mod mutex;
pub(crate) mod note;
pub(crate) mod read_write;
pub(crate) mod semaphore;
