//! Task-scoped reentrancy: which task holds which name through this locker.
//!
//! In async Rust the owner of a lock is the task, not the thread (a task moves between threads
//! at every await). A task that holds a name and asks for it again — a locked handler calling a
//! locked helper — gets a nested guard on the same lease instead of waiting for itself until
//! its wait runs out. Other tasks, including tasks it spawns, still wait.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use tokio::task::Id;

use crate::held::Held;

/// Which lease each (task, name) pair holds.
type ByTask = HashMap<(Id, Arc<str>), Weak<Held>>;

#[derive(Default)]
pub(crate) struct Owners {
    held: Mutex<ByTask>,
}

impl Owners {
    fn map(&self) -> MutexGuard<'_, ByTask> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The lease the current task holds on `name`, if any and still held.
    pub(crate) fn current(&self, name: &Arc<str>) -> Option<Arc<Held>> {
        let task = tokio::task::try_id()?;
        let held = self.map().get(&(task, Arc::clone(name)))?.upgrade()?;
        held.is_held().then_some(held)
    }

    /// Records that the current task holds `held` (outside a task: nothing to record).
    pub(crate) fn enter(&self, name: &Arc<str>, held: &Arc<Held>) -> Option<Id> {
        let task = tokio::task::try_id()?;
        self.map()
            .insert((task, Arc::clone(name)), Arc::downgrade(held));
        Some(task)
    }

    /// The outermost guard of `task` on `name` is gone.
    pub(crate) fn leave(&self, task: Id, name: &Arc<str>) {
        self.map().remove(&(task, Arc::clone(name)));
    }
}
