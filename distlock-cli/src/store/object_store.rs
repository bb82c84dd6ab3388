//! [`Store`] on an object store (`s3://bucket/prefix`): lock-object-store's own inspector
//! (objects listed and read, released by token as the holder's own release would), and an
//! `ObjectStoreLock` on the same bucket for `run` and elections. The endpoint and credentials come from the usual AWS variables
//! (`AWS_ENDPOINT_URL`, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`).

use std::sync::Arc;

use async_trait::async_trait;
use lock_core::backend::{Inspect, Lock};
use lock_object_store::ObjectStoreLock;

use super::Store;
use crate::cli::TargetArgs;
use crate::exit::{Failure, USAGE};

/// The bucket and prefix the URL names, and the lock on them.
pub(crate) struct ObjectStoreTarget {
    lock: ObjectStoreLock,
}

impl ObjectStoreTarget {
    /// The lock on the one `s3://bucket/prefix` URL given (`--prefix` replaces the URL's).
    ///
    /// # Errors
    /// A usage failure for several URLs or a configuration the S3 client refuses.
    pub(crate) async fn connect(args: &TargetArgs) -> Result<Self, Failure> {
        let [url] = args.url.as_slice() else {
            return Err(Failure::new(USAGE, "give one s3://bucket/prefix URL"));
        };
        let mut builder = ObjectStoreLock::builder()
            .url(url.as_str())
            .timeout(args.command_timeout.max(args.connect_timeout));
        if let Some(prefix) = &args.prefix {
            builder = builder.prefix(prefix.as_str());
        }
        Ok(Self {
            lock: builder.build()?,
        })
    }
}

#[async_trait]
impl Store for ObjectStoreTarget {
    fn backend(&self) -> &'static str {
        "object-store"
    }

    fn inspector(&self) -> Option<&dyn Inspect> {
        Some(&self.lock)
    }

    fn lock(&self, _describe: Option<&str>) -> Result<Arc<dyn Lock>, Failure> {
        Ok(Arc::new(self.lock.clone()))
    }

    /// Nothing to install: a fenced write to an object is `lock_object_store::fenced_put`, a
    /// conditional write any S3 client can make.
    async fn migrate(&self) -> Result<(String, serde_json::Value), Failure> {
        Ok((
            "object-store: nothing to install (a fenced write is a conditional write carrying \
             the token: lock_object_store::fenced_put)"
                .to_owned(),
            serde_json::json!({ "backend": "object-store", "installed": [] }),
        ))
    }
}
