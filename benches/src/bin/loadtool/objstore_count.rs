//! A store that counts the requests it forwards: O5's measure of what renewal costs in
//! billed requests (S3 bills per request). Conditional or not, a `put_opts` is one PUT, a
//! `get_opts` one GET (or HEAD), a delete one DELETE: `object_store`'s S3 client sends one
//! HTTP request for each when it is not retrying.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use futures::StreamExt as _;
use futures::stream::BoxStream;
use lock_object_store::object_store::path::Path;
use lock_object_store::object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, Result,
};

/// Requests forwarded so far, by kind.
#[derive(Debug, Default)]
pub(crate) struct Counts {
    pub(crate) puts: AtomicU64,
    pub(crate) gets: AtomicU64,
    pub(crate) deletes: AtomicU64,
    /// Lists, copies and multipart uploads (the lock sends none).
    pub(crate) other: AtomicU64,
}

impl Counts {
    /// `(puts, gets, deletes, other)` now.
    pub(crate) fn now(&self) -> [u64; 4] {
        [&self.puts, &self.gets, &self.deletes, &self.other].map(|c| c.load(Ordering::Relaxed))
    }
}

/// `inner`, counting what passes.
#[derive(Debug)]
pub(crate) struct Counted {
    inner: Arc<dyn ObjectStore>,
    counts: Arc<Counts>,
}

impl Counted {
    pub(crate) fn new(inner: Arc<dyn ObjectStore>, counts: Arc<Counts>) -> Self {
        Self { inner, counts }
    }
}

impl fmt::Display for Counted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "counted {}", self.inner)
    }
}

fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

#[async_trait]
impl ObjectStore for Counted {
    async fn put_opts(&self, at: &Path, payload: PutPayload, o: PutOptions) -> Result<PutResult> {
        bump(&self.counts.puts);
        self.inner.put_opts(at, payload, o).await
    }

    async fn put_multipart_opts(
        &self,
        at: &Path,
        o: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        bump(&self.counts.other);
        self.inner.put_multipart_opts(at, o).await
    }

    async fn get_opts(&self, at: &Path, o: GetOptions) -> Result<GetResult> {
        bump(&self.counts.gets);
        self.inner.get_opts(at, o).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        let counts = Arc::clone(&self.counts);
        let counted = locations.inspect(move |_| bump(&counts.deletes)).boxed();
        self.inner.delete_stream(counted)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        bump(&self.counts.other);
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        bump(&self.counts.other);
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, o: CopyOptions) -> Result<()> {
        bump(&self.counts.other);
        self.inner.copy_opts(from, to, o).await
    }
}
