//! The lease of the innermost `#[distributed_lock]` function running in this task.

use lock_core::LeaseWatch;

tokio::task_local! {
    pub(crate) static CURRENT: LeaseWatch;
}

/// The lease of the innermost `#[distributed_lock]` function whose body is running in the
/// current task, or `None` outside one.
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
    CURRENT.try_with(LeaseWatch::clone).ok()
}
