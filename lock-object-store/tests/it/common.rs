//! What the tests share: one SeaweedFS server per test binary, and locks on it.

use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use lock_object_store::ObjectStoreLock;
use lock_testkit::{SEAWEEDFS_ACCESS_KEY, SEAWEEDFS_SECRET_KEY, SeaweedfsServer};

/// The per-request bound the tests' locks use.
pub(crate) const TIMEOUT: Duration = Duration::from_secs(3);

/// The server of the tests running now, or a new one; stopped by its PID when the last of
/// them ends.
pub(crate) fn shared() -> Arc<SeaweedfsServer> {
    static SERVER: Mutex<Weak<SeaweedfsServer>> = Mutex::new(Weak::new());
    let mut shared = SERVER.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(server) = shared.upgrade() {
        return server;
    }
    let server = Arc::new(SeaweedfsServer::start().expect("start seaweedfs"));
    *shared = Arc::downgrade(&server);
    server
}

/// A lock on `server`'s bucket under `prefix`, with the test identity.
pub(crate) fn lock_on(server: &SeaweedfsServer, prefix: &str) -> ObjectStoreLock {
    lock_at(&server.endpoint(), &server.url(prefix))
}

/// A lock on the S3 endpoint `endpoint` at `url`, with the test identity.
pub(crate) fn lock_at(endpoint: &str, url: &str) -> ObjectStoreLock {
    ObjectStoreLock::builder()
        .url(url)
        .endpoint(endpoint)
        .credentials(SEAWEEDFS_ACCESS_KEY, SEAWEEDFS_SECRET_KEY)
        .region("us-east-1")
        .timeout(TIMEOUT)
        .build()
        .expect("valid S3 configuration")
}
