//! [`Store`] on an object store (`s3://bucket/prefix`): lock-object-store's objects listed and
//! read (one `GET` each), released by token as the holder's own release would (rewritten
//! without a holder, the epoch kept), and an `ObjectStoreLock` on the same bucket for `run`
//! and elections. The endpoint and credentials come from the usual AWS variables
//! (`AWS_ENDPOINT_URL`, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`).

use std::sync::Arc;

use async_trait::async_trait;
use lock_core::backend::{Holder, Lock};
use lock_object_store::{LockObject, ObjectStoreLock};

use super::Store;
use crate::cli::{ScanArgs, TargetArgs};
use crate::exit::{Failure, USAGE};
use crate::inspect::{Listing, LockInfo};

/// The bucket and prefix the URL names, and the lock on them.
pub(crate) struct ObjectStoreTarget {
    lock: ObjectStoreLock,
    /// The URL, for the `node` column.
    url: String,
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
            url: url.clone(),
        })
    }

    /// A held lock object as `ls` and `show` print it (`None` when released).
    fn info(&self, object: LockObject) -> Option<LockInfo> {
        let token = object.holder?;
        let lease_ms = i64::try_from(object.lease.as_millis()).unwrap_or(i64::MAX);
        // The lease is the most the holder has left: only a contender's own observation can
        // tell less, and this read is the first.
        let holder = Holder::new(object.epoch, Some(object.lease));
        let holder = match object.note {
            Some(note) => holder.with_note(note),
            None => holder,
        };
        Some(LockInfo {
            name: object.name,
            key: object.key,
            kind: "mutex",
            token: Some(token),
            ttl_ms: Some(lease_ms),
            fencing_token: Some(object.epoch),
            holder: Some(holder),
            node: self.url.clone(),
            ..LockInfo::default()
        })
    }
}

#[async_trait]
impl Store for ObjectStoreTarget {
    fn backend(&self) -> &'static str {
        "object-store"
    }

    async fn scan(&self, pattern: &str, _scan: &ScanArgs) -> Result<Listing, Failure> {
        let matcher = glob::Pattern::new(pattern)
            .map_err(|e| Failure::new(USAGE, format!("bad pattern {pattern:?}: {e}")))?;
        let names = self.lock.names().await?;
        let scanned = names.len() as u64;
        let mut locks = Vec::new();
        for name in names.iter().filter(|n| matcher.matches(n)) {
            // Another program's object under the prefix is not a lock: left out.
            if let Ok(Some(object)) = self.lock.inspect(name).await {
                locks.extend(self.info(object));
            }
        }
        Ok(Listing {
            locks,
            keys_scanned: scanned,
            truncated: false,
        })
    }

    async fn read(&self, name: &str) -> Result<Vec<LockInfo>, Failure> {
        let object = self.lock.inspect(name).await?;
        Ok(object.and_then(|o| self.info(o)).into_iter().collect())
    }

    async fn release_token(&self, name: &str, token: &str) -> Result<bool, Failure> {
        Ok(self.lock.release_token(name, token).await?)
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
