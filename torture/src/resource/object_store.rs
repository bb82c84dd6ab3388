//! The fenced log of the object-storage scenarios: one object on the lock's own SeaweedFS,
//! rewritten whole by [`fenced_put`] (the `distlock` library's user-side fence: the last
//! writer's token in the object's metadata, the write conditional on the version it read).
//!
//! An append reads the log (`GET`), then `fenced_put`s the log plus the entry. `fenced_put`
//! conditions its write on the version *its own* read saw, so a write accepted between the
//! append's `GET` and that read would be overwritten: that needs two writers at once whose
//! tokens the fence both accepts, which the checker reports as an overlap anyway (the counter
//! and the history), never as a quiet pass.

use std::time::Duration;

use distlock::object_store::object_store::path::Path;
use distlock::object_store::object_store::{self, ObjectStore, ObjectStoreExt, PutPayload};
use distlock::object_store::{ObjectStoreLock, fenced_put};
use distlock::{Fence, LockError, Op};
use lock_testkit::{SEAWEEDFS_ACCESS_KEY, SEAWEEDFS_SECRET_KEY};

/// The log objects' folder, outside the locks' prefix.
const LOG_DIR: &str = "torture-resource";
/// The log object of the run's one lock.
const LOG_PATH: &str = "torture-resource/accepted";

/// The log object of `lock`: [`LOG_PATH`] for the run's one lock, one beside it per
/// multi-lock name (its fence token lives in the object's metadata: one object per name keeps
/// the names' tokens apart).
pub(super) fn log_path(lock: Option<&str>) -> String {
    // `:` spelled `-`: a plain object name on every store.
    super::resource_of(LOG_PATH, lock).replace(':', "-")
}

/// An `ObjectStoreLock` on `url` (`s3://bucket/prefix`) at `endpoint`, with the test server's
/// credentials; each request bounded by `timeout`.
///
/// # Errors
/// If the URL or endpoint is malformed.
pub fn s3_lock(endpoint: &str, url: &str, timeout: Duration) -> Result<ObjectStoreLock, LockError> {
    ObjectStoreLock::builder()
        .url(url)
        .endpoint(endpoint)
        .credentials(SEAWEEDFS_ACCESS_KEY, SEAWEEDFS_SECRET_KEY)
        .region("us-east-1")
        .timeout(timeout)
        .build()
}

/// A worker's fenced log on object storage.
pub(super) struct ObjectLog {
    lock: ObjectStoreLock,
    timeout: Duration,
}

impl ObjectLog {
    /// The log on the store of `url` at `endpoint`.
    pub(super) fn connect(endpoint: &str, url: &str) -> Result<ObjectLog, String> {
        let timeout = Duration::from_secs(2);
        Ok(ObjectLog {
            lock: s3_lock(endpoint, url, timeout).map_err(|e| e.to_string())?,
            timeout,
        })
    }

    /// Appends `entry` to the log object of `fence`'s resource ([`log_path`]) behind `fence`;
    /// a stale token is `LockError::Fenced`.
    pub(super) async fn append(&mut self, fence: &Fence, entry: &str) -> Result<(), LockError> {
        let store = self.lock.store().as_ref();
        let path = Path::from(fence.resource.as_str());
        // Bounded like the fenced write; a failed read is a failed write of the resource.
        let mut log = tokio::time::timeout(self.timeout, read(store, &path))
            .await
            .unwrap_or_else(|_| Err("the log's read timed out".to_owned()))
            .map_err(|e| LockError::Backend {
                backend: distlock::object_store::BACKEND,
                op: Op::Write,
                retryable: true,
                source: e.into(),
            })?;
        log.push_str(entry);
        log.push('\n');
        fenced_put(store, fence, PutPayload::from(log), self.timeout)
            .await
            .map(drop)
    }
}

/// The log's text; empty before its first write.
async fn read(store: &dyn ObjectStore, path: &Path) -> Result<String, String> {
    match store.get(path).await {
        Ok(got) => {
            let bytes = got.bytes().await.map_err(|e| e.to_string())?;
            String::from_utf8(bytes.to_vec()).map_err(|e| e.to_string())
        }
        Err(object_store::Error::NotFound { .. }) => Ok(String::new()),
        Err(e) => Err(e.to_string()),
    }
}

/// Every log object's entries, each object's in the order they were accepted (the checker
/// orders each lock's apart), read at the end of a run.
pub(super) async fn entries(endpoint: &str, url: &str) -> Result<Vec<String>, String> {
    let lock = s3_lock(endpoint, url, Duration::from_secs(5)).map_err(|e| e.to_string())?;
    let store = lock.store().as_ref();
    let listed = store
        .list_with_delimiter(Some(&Path::from(LOG_DIR)))
        .await
        .map_err(|e| e.to_string())?;
    let mut entries = Vec::new();
    for object in &listed.objects {
        let text = read(store, &object.location).await?;
        entries.extend(text.lines().map(str::to_owned));
    }
    Ok(entries)
}
