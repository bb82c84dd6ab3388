//! One attempt at each kind of lock, as free functions over the store (held locked by the
//! caller): the layout of every backend's kinds.

pub(super) mod fair;
pub(super) mod mutex;
pub(super) mod read_write;
pub(super) mod semaphore;
