//! Per-process machinery behind the `Locker` and its guards: nothing here is public.
//!
//! - `renewal`: the watchdog that keeps renewing leases alive, one task per runtime;
//! - `waiters`: this process's queue of waiters per name, and the local handoff;
//! - `held`: the state of one held lease, shared by its guard and the watchdog;
//! - `oldest`: the oldest hold per series, which the watchdogs report;
//! - `owners`: which task holds which name (reentrancy);
//! - `handoff`: how a guard's end hands the lock on or releases it;
//! - `cleanup`: releases that must happen even when their caller is dropped.

pub(crate) mod cleanup;
pub(crate) mod handoff;
pub(crate) mod held;
pub(crate) mod oldest;
pub(crate) mod owners;
pub(crate) mod renewal;
pub(crate) mod revocation;
pub(crate) mod waiters;
