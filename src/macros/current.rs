//! The lease (or leases) of the innermost `#[distributed_lock]` function running in this task.

use std::sync::Arc;

use lock_core::LeaseWatch;

tokio::task_local! {
    /// The leases of the innermost locked function: one for a single template, one per
    /// template in the order written for a list (never empty).
    pub(crate) static CURRENT: Arc<[LeaseWatch]>;
}

/// The lease of the innermost `#[distributed_lock]` function whose body is running in the
/// current task, or `None` outside one. For a function that locks a list of templates, the
/// lease of the first template's name; [`current_leases`] returns them all.
///
/// The lock name, the fencing token to pass to the resource you protect, and the lost-lease
/// signal: [`LeaseWatch::lost`] resolves when the lease ends while the body runs. You rarely
/// need to await it, since the body is cancelled when the lease is lost; it is there to stop
/// work that does not await (hand it to a blocking thread) or to bound a call that must not
/// outlive the lease.
///
/// It is a task-local value: code in the body sees it, including functions it calls and
/// futures it awaits, but not tasks it spawns (they are other tasks; pass them a clone).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), distlock::LockError> {
/// use distlock::{LockError, Locker, MemoryLock};
///
/// #[distlock::distributed_lock("invoice:{id}", locker = locker)]
/// async fn send_invoice(locker: &Locker, id: u32) -> Result<u64, LockError> {
///     let lease = distlock::current_lease().expect("inside a locked function");
///     assert_eq!(lease.name(), format!("invoice:{id}"));
///     Ok(lease.fencing_token()) // hand it to the store: it refuses smaller ones
/// }
///
/// let locker = Locker::new(MemoryLock::new());
/// assert!(send_invoice(&locker, 7).await? > 0);
/// assert!(distlock::current_lease().is_none());
/// # Ok(()) }
/// ```
#[must_use]
pub fn current_lease() -> Option<LeaseWatch> {
    CURRENT
        .try_with(|leases| leases.first().cloned())
        .ok()
        .flatten()
}

/// The leases of the innermost `#[distributed_lock]` function whose body is running in the
/// current task: one per template, in the order the templates are written (a single template
/// gives one), each with its own name and fencing token; empty outside a locked function.
///
/// Two templates that render the same name (a transfer from an account to itself) hold one
/// lease, which appears at both places. Like [`current_lease`], it is task-local.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), distlock::LockError> {
/// use distlock::{LockError, Locker, MemoryLock};
///
/// #[distlock::distributed_lock(["account:{from}", "account:{to}"], locker = locker)]
/// async fn transfer(locker: &Locker, from: u32, to: u32) -> Result<Vec<String>, LockError> {
///     let leases = distlock::current_leases();
///     // Hand each store the fencing token of its own name: `leases[i].fencing_token()`.
///     Ok(leases.iter().map(|lease| lease.name().to_owned()).collect())
/// }
///
/// let locker = Locker::new(MemoryLock::new());
/// assert_eq!(transfer(&locker, 7, 3).await?, ["account:7", "account:3"]);
/// assert!(distlock::current_leases().is_empty());
/// # Ok(()) }
/// ```
#[must_use]
pub fn current_leases() -> Vec<LeaseWatch> {
    CURRENT
        .try_with(|leases| leases.to_vec())
        .unwrap_or_default()
}
