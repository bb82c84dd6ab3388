//! The conformance suite over `MemoryLock` on a paused clock: every check of every module,
//! one test each (`memory::read_write::readers_share`), from the suite's one list and
//! `MemoryLock`'s capability table.

mod memory {
    use std::sync::Arc;

    use lock_core::{Locker, MemoryLock};
    use lock_testkit::conformance::Backend;

    /// Lockers over one fresh store, as several processes over one server would be.
    fn memory() -> Backend {
        let store = Arc::new(MemoryLock::new());
        Backend::new(move || Locker::new(Arc::clone(&store)))
    }

    lock_testkit::conformance_tests!(
        #[tokio::test(start_paused = true)]
        ((), memory())
    );
}
