//! What the tests share: one SeaweedFS server per test binary, locks on it, and a slow store.

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use async_trait::async_trait;
use futures::stream::BoxStream;
use lock_object_store::ObjectStoreLock;
use lock_object_store::object_store::path::Path;
use lock_object_store::object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, Result as OsResult,
};
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

/// A store with a network's delays between a client and it: a write is applied a while after
/// it was sent, whether or not its caller still waits for it (the request has left), and
/// answered a while after that; a read is answered late too. A caller that gives up before
/// the answer came leaves a write the store applied, or will apply, that nobody received.
/// Counts the delayed writes it applied.
#[derive(Debug)]
pub(crate) struct SlowStore {
    inner: Arc<dyn ObjectStore>,
    /// How long after it was sent a write is applied.
    apply: Duration,
    /// How late a write's answer comes back after it was applied.
    answer: Duration,
    /// How late a read reaches the store, and how late its answer comes back.
    read: Duration,
    /// The one object whose requests are delayed, when not all are.
    only: Option<Path>,
    /// The delayed writes the store applied.
    pub(crate) applied: Arc<AtomicUsize>,
}

impl SlowStore {
    /// Reads `latency` late each way; writes applied twice that after they were sent (a write
    /// takes the store longer than a read, so a read sent after it may overtake it) and
    /// answered `latency` after.
    pub(crate) fn new(inner: Arc<dyn ObjectStore>, latency: Duration) -> Self {
        Self {
            inner,
            apply: latency * 2,
            answer: latency,
            read: latency,
            only: None,
            applied: Arc::default(),
        }
    }

    /// The writes of the object `at` applied at once and answered `late`; nothing else delayed.
    pub(crate) fn late_write_answers(
        inner: Arc<dyn ObjectStore>,
        at: &str,
        late: Duration,
    ) -> Self {
        Self {
            inner,
            apply: Duration::ZERO,
            answer: late,
            read: Duration::ZERO,
            only: Some(Path::from(at)),
            applied: Arc::default(),
        }
    }

    fn delays(&self, at: &Path) -> bool {
        self.only.as_ref().is_none_or(|only| only == at)
    }
}

impl fmt::Display for SlowStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "slow {}", self.inner)
    }
}

#[async_trait]
impl ObjectStore for SlowStore {
    async fn put_opts(&self, at: &Path, payload: PutPayload, o: PutOptions) -> OsResult<PutResult> {
        if !self.delays(at) {
            return self.inner.put_opts(at, payload, o).await;
        }
        let (inner, path, apply) = (Arc::clone(&self.inner), at.clone(), self.apply);
        let applied = Arc::clone(&self.applied);
        // The request has left: the store applies it whether or not its caller still waits.
        let write = tokio::spawn(async move {
            tokio::time::sleep(apply).await;
            let answer = inner.put_opts(&path, payload, o).await;
            applied.fetch_add(1, Ordering::SeqCst);
            answer
        });
        let answer = write.await.expect("the write's task ran");
        tokio::time::sleep(self.answer).await;
        answer
    }

    async fn put_multipart_opts(
        &self,
        at: &Path,
        o: PutMultipartOptions,
    ) -> OsResult<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(at, o).await
    }

    async fn get_opts(&self, at: &Path, o: GetOptions) -> OsResult<GetResult> {
        if !self.delays(at) {
            return self.inner.get_opts(at, o).await;
        }
        tokio::time::sleep(self.read).await;
        let answer = self.inner.get_opts(at, o).await;
        tokio::time::sleep(self.read).await;
        answer
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, OsResult<Path>>,
    ) -> BoxStream<'static, OsResult<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, OsResult<ObjectMeta>> {
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> OsResult<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, o: CopyOptions) -> OsResult<()> {
        self.inner.copy_opts(from, to, o).await
    }
}
