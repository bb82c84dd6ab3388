//! The conformance suite (`lock_testkit::conformance`) over `ObjectStoreLock`: on
//! `object_store`'s in-memory store (`memory::...`, on a paused clock) and on a real
//! S3-compatible server, SeaweedFS (`seaweedfs::...`). What runs comes from the suite's one
//! list and the lock's capability table: the mutex, the multi-lock (one name after the other)
//! and leader election with observers; read-write, semaphore and fair are checked to be
//! refused before any request. Each locker has a lock of its own (its own observations of the
//! objects, like another process), all on one store.

/// Lockers over one in-memory store.
mod memory {
    use std::sync::Arc;
    use std::time::Duration;

    use lock_core::Locker;
    use lock_object_store::ObjectStoreLock;
    use lock_object_store::object_store::memory::InMemory;
    use lock_testkit::conformance::Backend;

    fn backend() -> Backend {
        let store = Arc::new(InMemory::new());
        Backend::new(move || {
            Locker::new(ObjectStoreLock::new(
                store.clone(),
                "locks",
                Duration::from_secs(5),
            ))
        })
    }

    lock_testkit::conformance_tests!(
        #[tokio::test(start_paused = true)]
        ((), backend())
    );
}
