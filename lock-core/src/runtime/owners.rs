//! Task-scoped reentrancy: which task holds which name through this locker.
//!
//! In async Rust the owner of a lock is the task, not the thread (a task moves between threads
//! at every await). A task that holds a name and asks for it again — a locked handler calling a
//! locked helper — gets a nested guard on the same lease instead of waiting for itself until
//! its wait runs out. Other tasks, including tasks it spawns, still wait.
//!
//! A name is recorded per family: the mutex, and the read-write lock (a read share or the
//! write lock). Semaphore permits are not reentrant: a task asking again takes more permits.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use tokio::task::Id;

use crate::kind::{Class, Kind};
use crate::runtime::held::HeldLease;

/// Which lease each (task, name) pair holds. Hashed with foldhash (seeded per process): every
/// grant and release hashes its name here, and SipHash, the standard map's, cost ~600 client
/// instructions of an acquire + release cycle of ~35,000 (`scripts/client-cost.sh`).
type ByTask = HashMap<(Id, Arc<str>, Class), Weak<HeldLease>, foldhash::fast::RandomState>;

/// The family a kind's reentrancy is recorded under; `None` for kinds that are not reentrant.
pub(crate) fn family(kind: Kind) -> Option<Class> {
    match kind.class() {
        // A fair lock is the mutex of its name, taken in turn.
        Class::Mutex | Class::Fair => Some(Class::Mutex),
        Class::Read | Class::Write => Some(Class::Write),
        Class::Semaphore => None,
    }
}

#[derive(Default)]
pub(crate) struct Owners {
    held: Mutex<ByTask>,
    /// The map's length, stored under its lock: while no task of this locker holds anything,
    /// a request asks this atomic instead of taking the lock and hashing its name. (Only the
    /// current task's own entries matter to it, and those it wrote itself, before.)
    entries: AtomicUsize,
}

impl Owners {
    fn map(&self) -> MutexGuard<'_, ByTask> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The lease the current task holds on `name` in the family of `kind`, if any and still
    /// held.
    pub(crate) fn current(&self, name: &Arc<str>, kind: Kind) -> Option<Arc<HeldLease>> {
        let family = family(kind)?;
        if self.entries.load(Ordering::Relaxed) == 0 {
            return None;
        }
        let task = tokio::task::try_id()?;
        let held = self
            .map()
            .get(&(task, Arc::clone(name), family))?
            .upgrade()?;
        held.is_held().then_some(held)
    }

    /// Records that the current task holds `held` (outside a task, or for a kind that is not
    /// reentrant: nothing to record).
    pub(crate) fn enter(&self, name: &Arc<str>, held: &Arc<HeldLease>) -> Option<Id> {
        let family = family(held.kind())?;
        let task = tokio::task::try_id()?;
        let mut map = self.map();
        map.insert((task, Arc::clone(name), family), Arc::downgrade(held));
        self.entries.store(map.len(), Ordering::Relaxed);
        Some(task)
    }

    /// The outermost guard of `task` on `name`, of the family of `kind`, is gone.
    pub(crate) fn leave(&self, task: Id, name: &Arc<str>, kind: Kind) {
        if let Some(family) = family(kind) {
            let mut map = self.map();
            map.remove(&(task, Arc::clone(name), family));
            self.entries.store(map.len(), Ordering::Relaxed);
        }
    }
}
