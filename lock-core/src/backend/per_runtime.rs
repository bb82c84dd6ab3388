//! One value per tokio runtime: a backend's connection or background task, made on the first use
//! from a runtime and dropped once that runtime is gone.
//!
//! A task spawned on a runtime never runs again once that runtime shuts down, and a connection
//! whose driver task ran there is dead with it. One backend value may serve several runtimes, in
//! sequence (every `#[tokio::test]` has its own) or at once (a runtime per component), so it
//! keeps one of each per runtime. A runtime's value is looked up on every lock operation, so the
//! look-up is one uncontended mutex and a scan of a short list (one entry per runtime that used
//! the backend), with no allocation and no clone of the runtime's handle.

use std::fmt;
use std::sync::{Mutex, MutexGuard, PoisonError};

use tokio::runtime::{Handle, Id};
use tokio::task::JoinHandle;

/// One `T` per tokio runtime, made on the first use from a runtime and dropped once that
/// runtime has shut down.
///
/// Whether a runtime is gone is told by a task on it: the value's own task, when it has one
/// ([`get_or_start`](PerRuntime::get_or_start)), or else a probe task that never ends on its own
/// ([`insert`](PerRuntime::insert)). A task on a runtime that shuts down is dropped by it, and its
/// [`JoinHandle::is_finished`] turns true once its future has been dropped (so whatever that
/// future's drop hands back is in place by then). A value's own task that ends for a reason of
/// its own (it gave up, its backend was dropped) counts as gone the same way: the next use from
/// its runtime starts another.
///
/// Every method that looks values up first drops those of runtimes that are gone, through the
/// *retire* function (plain drop unless [`with_retire`](PerRuntime::with_retire) says otherwise).
/// Dropping the `PerRuntime` drops every value (not retired) and aborts the probes; a value's own
/// task is left to end by the value's own means (a channel closed by its drop, say).
///
/// ```
/// use lock_core::backend::PerRuntime;
///
/// let made = PerRuntime::<u32>::new();
/// let first = tokio::runtime::Runtime::new().expect("a runtime");
/// let second = tokio::runtime::Runtime::new().expect("a runtime");
/// let one = first.block_on(async { made.insert(1, |v| *v) });
/// let two = second.block_on(async { made.insert(2, |v| *v) });
/// assert_eq!((one, two, made.len()), (1, 2, 2));
/// drop(first);
/// // The first runtime's value goes at the next look-up.
/// assert_eq!(second.block_on(async { made.insert(3, |v| *v) }), 2);
/// assert_eq!(made.len(), 1);
/// ```
pub struct PerRuntime<T> {
    slots: Mutex<Vec<Slot<T>>>,
    retire: fn(T),
}

/// One runtime's value and the task that tells whether the runtime is still there.
struct Slot<T> {
    runtime: Id,
    alive: Alive,
    value: T,
}

/// What tells that a slot's runtime is still there.
enum Alive {
    /// The value's own task, on its runtime: the value's business to end.
    Task(JoinHandle<()>),
    /// A task that never ends on its own, spawned for this alone; aborted with its slot.
    Probe(Probe),
}

struct Probe(JoinHandle<()>);

impl Drop for Probe {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Alive {
    fn is_gone(&self) -> bool {
        match self {
            Self::Task(task) => task.is_finished(),
            Self::Probe(Probe(task)) => task.is_finished(),
        }
    }
}

impl<T> Default for PerRuntime<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> PerRuntime<T> {
    /// An empty table whose values of runtimes that are gone are simply dropped.
    #[must_use]
    pub const fn new() -> Self {
        Self::with_retire(drop)
    }

    /// An empty table that hands each value whose runtime is gone to `retire` (instead of
    /// dropping it): to take a dead connection out of its pool for good, or to hand a dead
    /// task's work to another runtime.
    ///
    /// `retire` runs while the table is locked: it must not use this table.
    #[must_use]
    pub const fn with_retire(retire: fn(T)) -> Self {
        Self {
            slots: Mutex::new(Vec::new()),
            retire,
        }
    }

    /// The table, locked, without the values of runtimes that are gone (so a look-up after it
    /// needs only compare ids).
    fn live(&self) -> MutexGuard<'_, Vec<Slot<T>>> {
        let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        // `swap_remove` keeps this allocation-free; the order of the slots does not matter.
        while let Some(at) = slots.iter().position(|slot| slot.alive.is_gone()) {
            (self.retire)(slots.swap_remove(at).value);
        }
        slots
    }

    /// `read` applied to the value of the runtime `runtime`, if it has one and is still there;
    /// `None` otherwise. Values of runtimes that are gone are retired first.
    ///
    /// Takes the runtime's id (`Handle::current().id()`), not its handle, so that a caller that
    /// also needs the id elsewhere reads the current runtime once.
    pub fn get<R>(&self, runtime: Id, read: impl FnOnce(&T) -> R) -> Option<R> {
        let slots = self.live();
        slots
            .iter()
            .find(|slot| slot.runtime == runtime)
            .map(|slot| read(&slot.value))
    }

    /// `read` applied to the current runtime's value, made first by `start` if the runtime has
    /// none. `start` gets the current runtime's handle and returns the value and the task it
    /// spawned there to serve it; the task's end tells that the runtime is gone. Values of
    /// runtimes that are gone are retired first.
    ///
    /// `start` and `read` run while the table is locked: they must not use this table.
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub fn get_or_start<R>(
        &self,
        start: impl FnOnce(&Handle) -> (T, JoinHandle<()>),
        read: impl FnOnce(&T) -> R,
    ) -> R {
        self.get_or_start_on(&Handle::current(), start, read)
    }

    /// [`get_or_start`](PerRuntime::get_or_start), or `None` outside a tokio runtime (for
    /// work that is optional there, instead of a panic).
    pub(crate) fn try_get_or_start<R>(
        &self,
        start: impl FnOnce(&Handle) -> (T, JoinHandle<()>),
        read: impl FnOnce(&T) -> R,
    ) -> Option<R> {
        let runtime = Handle::try_current().ok()?;
        Some(self.get_or_start_on(&runtime, start, read))
    }

    fn get_or_start_on<R>(
        &self,
        runtime: &Handle,
        start: impl FnOnce(&Handle) -> (T, JoinHandle<()>),
        read: impl FnOnce(&T) -> R,
    ) -> R {
        let id = runtime.id();
        let mut slots = self.live();
        if let Some(slot) = slots.iter().find(|slot| slot.runtime == id) {
            return read(&slot.value);
        }
        let (value, task) = start(runtime);
        slots.push(Slot {
            runtime: id,
            alive: Alive::Task(task),
            value,
        });
        let slot = slots.last().expect("just pushed");
        read(&slot.value)
    }

    /// Makes `value` the current runtime's, unless the runtime has one already (made meanwhile
    /// by another task, say): `read` is applied to the value kept, and `value` is dropped if it
    /// is not. A value made this way has no task of its own: a task that never ends is spawned
    /// on the runtime to tell when it is gone (aborted when the value goes). Values of
    /// runtimes that are gone are retired first.
    ///
    /// For values made by async work (connecting): look up with [`get`](PerRuntime::get), make
    /// the value without the table locked, then insert it.
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub fn insert<R>(&self, value: T, read: impl FnOnce(&T) -> R) -> R {
        let runtime = Handle::current();
        let id = runtime.id();
        let mut slots = self.live();
        if let Some(slot) = slots.iter().find(|slot| slot.runtime == id) {
            return read(&slot.value);
        }
        slots.push(Slot {
            runtime: id,
            alive: Alive::Probe(Probe(runtime.spawn(std::future::pending()))),
            value,
        });
        let slot = slots.last().expect("just pushed");
        read(&slot.value)
    }

    /// Takes out the first value, of any runtime, for which `which` is true (a connection found
    /// broken, say), and returns it: the next use from its runtime makes another.
    pub fn remove_where(&self, mut which: impl FnMut(&T) -> bool) -> Option<T> {
        let mut slots = self.live();
        let at = slots.iter().position(|slot| which(&slot.value))?;
        Some(slots.swap_remove(at).value)
    }

    /// Calls `visit` with the value of every runtime that is still there.
    pub fn for_each(&self, mut visit: impl FnMut(&T)) {
        self.live().iter().for_each(|slot| visit(&slot.value));
    }

    /// How many runtimes that are still there have a value.
    #[must_use]
    pub fn len(&self) -> usize {
        self.live().len()
    }

    /// Whether no runtime that is still there has a value.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<T> fmt::Debug for PerRuntime<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        f.debug_struct("PerRuntime")
            .field("runtimes", &slots.len())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use tokio::runtime::{Builder, Runtime};

    use super::*;

    fn runtime() -> Runtime {
        Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime")
    }

    /// Counts the drops of its values, to tell a leak from a drop.
    #[derive(Clone, Default)]
    struct Drops(Arc<AtomicUsize>);

    struct Counted(u32, Drops);

    impl Drop for Counted {
        fn drop(&mut self) {
            (self.1).0.fetch_add(1, Ordering::SeqCst);
        }
    }

    impl Drops {
        fn seen(&self) -> usize {
            self.0.load(Ordering::SeqCst)
        }
    }

    /// A value with a task of its own that runs until the runtime goes.
    fn start(n: u32, drops: &Drops) -> impl FnOnce(&Handle) -> (Counted, JoinHandle<()>) {
        let drops = drops.clone();
        move |runtime| {
            let task = runtime.spawn(std::future::pending());
            (Counted(n, drops), task)
        }
    }

    #[test]
    fn two_runtimes_get_two_values_and_one_runtime_keeps_its_own() {
        let drops = Drops::default();
        let table = PerRuntime::new();
        let (first, second) = (runtime(), runtime());
        let a = first.block_on(async { table.get_or_start(start(1, &drops), |v| v.0) });
        let b = second.block_on(async { table.get_or_start(start(2, &drops), |v| v.0) });
        assert_eq!((a, b), (1, 2));
        // Asked again, each runtime gets its own, and `start` is not called.
        let again = first.block_on(async { table.get_or_start(start(3, &drops), |v| v.0) });
        assert_eq!(again, 1);
        let id = first.handle().id();
        assert_eq!(table.get(id, |v| v.0), Some(1));
        assert_eq!(table.get(second.handle().id(), |v| v.0), Some(2));
        assert_eq!(table.len(), 2);
        // Made by `insert`, the same: the first value of a runtime stays.
        let kept = first.block_on(async { table.insert(Counted(4, drops.clone()), |v| v.0) });
        assert_eq!(kept, 1);
        assert_eq!(drops.seen(), 1, "the value `insert` did not keep");
        drop(table);
        assert_eq!(drops.seen(), 3);
    }

    /// A runtime shut down while its value is in use (its task running, a task of that runtime
    /// waiting on it): the value is retired at the next look-up from another runtime, and the
    /// runtime's id never finds it again.
    #[test]
    fn the_value_of_a_runtime_dropped_in_use_is_replaced_without_a_leak() {
        static RETIRED: AtomicUsize = AtomicUsize::new(0);
        let drops = Drops::default();
        let table = Arc::new(PerRuntime::with_retire(|value: Counted| {
            RETIRED.fetch_add(1, Ordering::SeqCst);
            drop(value);
        }));
        let (gone, stays) = (runtime(), runtime());
        let gone_id = gone.handle().id();
        gone.block_on(async {
            table.get_or_start(start(1, &drops), |_| ());
            // A task that uses the value when it runs, still waiting when the runtime goes.
            let user = Arc::clone(&table);
            let id = tokio::runtime::Handle::current().id();
            tokio::spawn(async move {
                std::future::pending::<()>().await;
                user.get(id, |v| v.0)
            });
            tokio::task::yield_now().await;
        });
        let probed = gone.block_on(async { table.insert(Counted(9, drops.clone()), |v| v.0) });
        assert_eq!(probed, 1);
        drop(gone);
        assert_eq!(drops.seen(), 1, "only the value `insert` did not keep");
        let now = stays.block_on(async { table.get_or_start(start(2, &drops), |v| v.0) });
        assert_eq!(now, 2);
        assert_eq!(RETIRED.load(Ordering::SeqCst), 1);
        assert_eq!(drops.seen(), 2, "the gone runtime's value was dropped");
        assert_eq!(table.get(gone_id, |v| v.0), None);
        assert_eq!(table.len(), 1);
        // The waiting task of the gone runtime was dropped with it: only this one holds it.
        assert_eq!(Arc::strong_count(&table), 1);
    }

    #[test]
    fn a_value_whose_task_ended_is_made_again_on_its_runtime() {
        let drops = Drops::default();
        let table = PerRuntime::new();
        let rt = runtime();
        rt.block_on(async {
            let first = table.get_or_start(
                |runtime| (Counted(1, drops.clone()), runtime.spawn(async {})),
                |v| v.0,
            );
            assert_eq!(first, 1);
            tokio::task::yield_now().await;
            let second = table.get_or_start(start(2, &drops), |v| v.0);
            assert_eq!(second, 2);
        });
        assert_eq!(drops.seen(), 1);
    }

    #[test]
    fn a_probe_is_aborted_with_its_value_and_removed_values_are_handed_back() {
        let drops = Drops::default();
        let table = PerRuntime::new();
        let rt = runtime();
        rt.block_on(async {
            table.insert(Counted(1, drops.clone()), |_| ());
            let taken = table.remove_where(|v| v.0 == 1).expect("the value");
            assert_eq!(taken.0, 1);
            assert!(table.is_empty());
            assert!(table.remove_where(|_| true).is_none());
            let mut seen = Vec::new();
            table.insert(Counted(2, drops.clone()), |_| ());
            table.for_each(|v| seen.push(v.0));
            assert_eq!(seen, [2]);
        });
        drop(table);
        // Nothing was left on the runtime: its probe went with the value.
        rt.block_on(tokio::task::yield_now());
        assert_eq!(rt.metrics().num_alive_tasks(), 0);
        assert_eq!(drops.seen(), 2);
    }
}
