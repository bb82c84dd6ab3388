//! Redlock's kinds: the mutex alone, in `mutex.rs`, as functions over what every round of one
//! `Redlock` shares ([`Shared`](crate::shared::Shared)), and its observers (the holder's note
//! and description over a quorum) in `note.rs`; `Redlock`'s `impl Lock` calls them. A
//! quorum of read shares, permits or queues has no algorithm here, so the other kinds are
//! refused by lock-core's defaults before anything is sent, and the multi-lock is lock-core's
//! one name after the other (`acquire_in_order`): there is no Redlock code for either.

pub(crate) mod mutex;
pub(crate) mod note;
