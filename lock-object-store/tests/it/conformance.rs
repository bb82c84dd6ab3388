//! The conformance suite (`lock_testkit::conformance`) over `ObjectStoreLock`: on
//! `object_store`'s in-memory store (`memory::...`, on a paused clock) and on a real
//! S3-compatible server, SeaweedFS (`seaweedfs::...`). What runs comes from the suite's one
//! list and the lock's capability table: the mutex, the multi-lock (one name after the other)
//! and leader election with observers; read-write, semaphore and fair are checked to be
//! refused before any request. Each locker has a lock of its own (its own observations of the
//! objects, like another process), all on one store.

/// The suite's guarded writes on `store`: `fenced_put` of the value to the object the fence's
/// resource names, read back with a `GET`.
fn guarded_writes(
    store: std::sync::Arc<dyn lock_object_store::object_store::ObjectStore>,
) -> lock_testkit::conformance::GuardedWrites {
    use lock_object_store::object_store::ObjectStoreExt as _;
    use lock_object_store::object_store::path::Path;
    let reads = std::sync::Arc::clone(&store);
    lock_testkit::conformance::GuardedWrites::new(
        move |fence, value: String| {
            let store = std::sync::Arc::clone(&store);
            async move {
                let timeout = std::time::Duration::from_secs(5);
                lock_object_store::fenced_put(store.as_ref(), &fence, value.into(), timeout)
                    .await
                    .map(drop)
            }
        },
        move |resource: String| {
            let store = std::sync::Arc::clone(&reads);
            async move {
                let got = store.get(&Path::parse(&resource).expect("a path")).await;
                match got {
                    Ok(got) => Some(
                        String::from_utf8(got.bytes().await.expect("body").to_vec())
                            .expect("utf-8"),
                    ),
                    Err(lock_object_store::object_store::Error::NotFound { .. }) => None,
                    Err(e) => panic!("read {resource}: {e}"),
                }
            }
        },
    )
}

/// Lockers over one in-memory store.
mod memory {
    use std::sync::Arc;
    use std::time::Duration;

    use lock_core::Locker;
    use lock_object_store::ObjectStoreLock;
    use lock_object_store::object_store::memory::InMemory;
    use lock_testkit::conformance::Backend;

    use crate::common::SlowStore;

    fn backend() -> Backend {
        let store = Arc::new(InMemory::new());
        let late = Arc::clone(&store);
        let writes: Arc<dyn lock_object_store::object_store::ObjectStore> = store.clone();
        Backend::new(move || {
            Locker::new(ObjectStoreLock::new(
                store.clone(),
                "locks",
                Duration::from_secs(5),
            ))
        })
        // Late answers from a wrapper of the store, below the lock's own bookkeeping.
        .with_late_answers(move |latency| {
            let store = Arc::new(SlowStore::new(late.clone(), latency));
            Locker::new(ObjectStoreLock::new(store, "locks", Duration::from_secs(5)))
        })
        .with_guarded_writes(super::guarded_writes(writes))
    }

    lock_testkit::conformance_tests!(
        #[tokio::test(start_paused = true)]
        ((), backend())
    );
}

/// Lockers over one bucket of the binary's shared SeaweedFS server.
mod seaweedfs {
    use std::net::{Ipv4Addr, SocketAddr};
    use std::sync::Arc;
    use std::time::Duration;

    use lock_core::Locker;
    use lock_testkit::SeaweedfsServer;
    use lock_testkit::conformance::Backend;

    /// The modules whose kind the lock refuses: they check that nothing reaches the store.
    const REFUSED: [&str; 3] = ["read_write", "semaphore", "fair"];

    /// The shared server and lockers on it. The refused modules get no server: their one
    /// check asserts that no request is made, and nextest runs every test in a process of its
    /// own, where each would start one (the test thread is named after the test).
    fn setup() -> (Option<Arc<SeaweedfsServer>>, Backend) {
        let thread = std::thread::current();
        let test = thread.name().unwrap_or_default();
        let server = (!REFUSED.iter().any(|m| test.ends_with(m))).then(crate::common::shared);
        let (endpoint, url) = match &server {
            Some(server) => (server.endpoint(), server.url("conformance")),
            None => (
                "http://127.0.0.1:1".to_owned(),
                "s3://distlock/conformance".to_owned(),
            ),
        };
        let late_url = url.clone();
        let mut backend =
            Backend::new(move || Locker::new(crate::common::lock_at(&endpoint, &url)));
        // Late answers through a proxy in front of the S3 port; guarded writes to the bucket.
        if let Some(server) = &server {
            let store = crate::common::lock_at(&server.endpoint(), &late_url);
            backend = backend.with_guarded_writes(super::guarded_writes(Arc::clone(store.store())));
            let s3 = SocketAddr::from((Ipv4Addr::LOCALHOST, server.s3_port()));
            backend = backend.with_late_answers_through(s3, move |at| {
                Locker::new(crate::common::lock_at(&format!("http://{at}"), &late_url))
            });
            let endpoint = server.endpoint();
            let wrong_url = server.url("conformance");
            // No unprepared store here: SeaweedFS makes a missing bucket on the first write
            // (lock-object-store's tests and the command's check a listing's `BucketMissing`).
            backend = backend.with_wrong_credentials(move || {
                Locker::new(
                    lock_object_store::ObjectStoreLock::builder()
                        .url(wrong_url.as_str())
                        .endpoint(endpoint.as_str())
                        .credentials(lock_testkit::SEAWEEDFS_ACCESS_KEY, "not-the-secret")
                        .region("us-east-1")
                        .build()
                        .expect("valid S3 configuration"),
                )
            });
        }
        // Waiters poll (no announcements) a single-process SeaweedFS that the test command's
        // other tests load: the multi-lock's rounds took over 10 s there once (fresh-clone run
        // at 26f72b9), where they take 2-3 s on a quiet machine.
        backend.patience = Duration::from_secs(30);
        (server, backend)
    }

    lock_testkit::conformance_tests!(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        setup()
    );
}
