//! The builder: a store and a prefix, or an `s3://bucket/prefix` URL.

use std::sync::Arc;
use std::time::Duration;

use lock_core::LockError;
use object_store::ObjectStore;

use crate::ObjectStoreLock;

/// The default bound on one request to the store (a read or a conditional write), including
/// the client's own retries: 5 s.
pub const DEFAULT_OPERATION_TIMEOUT: Duration = Duration::from_secs(5);

/// Builds an [`ObjectStoreLock`]: from a store you made ([`ObjectStoreLockBuilder::store`],
/// any `object_store` store: S3, GCS, Azure, in-memory), or from an `s3://bucket/prefix` URL
/// with the endpoint and credentials taken from the usual AWS environment variables
/// (`AWS_ENDPOINT_URL`, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`, ...) unless
/// set here.
#[derive(Debug, Default, Clone)]
#[must_use]
pub struct ObjectStoreLockBuilder {
    store: Option<Arc<dyn ObjectStore>>,
    url: Option<String>,
    prefix: Option<String>,
    endpoint: Option<String>,
    credentials: Option<(String, String)>,
    region: Option<String>,
    timeout: Option<Duration>,
}

impl ObjectStoreLock {
    /// A builder with nothing set: give it a [`store`](ObjectStoreLockBuilder::store) or a
    /// [`url`](ObjectStoreLockBuilder::url).
    pub fn builder() -> ObjectStoreLockBuilder {
        ObjectStoreLockBuilder::default()
    }
}

impl ObjectStoreLockBuilder {
    /// The store to write lock objects to (any `object_store` store).
    pub fn store(mut self, store: Arc<dyn ObjectStore>) -> Self {
        self.store = Some(store);
        self
    }

    /// `s3://bucket/prefix`: an S3 (or S3-compatible) bucket, the lock objects under
    /// `prefix` (feature `aws`).
    pub fn url(mut self, url: impl Into<String>) -> Self {
        self.url = Some(url.into());
        self
    }

    /// The prefix the lock objects go under (`"locks"`: the lock `job` is `locks/job`),
    /// overriding the URL's.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = Some(prefix.into());
        self
    }

    /// The S3 endpoint (`http://127.0.0.1:8333` for a local S3-compatible server), instead of
    /// `AWS_ENDPOINT_URL`. A plain `http://` endpoint is allowed.
    pub fn endpoint(mut self, endpoint: impl Into<String>) -> Self {
        self.endpoint = Some(endpoint.into());
        self
    }

    /// The access key and secret, instead of `AWS_ACCESS_KEY_ID` and `AWS_SECRET_ACCESS_KEY`.
    pub fn credentials(mut self, key_id: impl Into<String>, secret: impl Into<String>) -> Self {
        self.credentials = Some((key_id.into(), secret.into()));
        self
    }

    /// The region, instead of `AWS_REGION` (default `us-east-1`).
    pub fn region(mut self, region: impl Into<String>) -> Self {
        self.region = Some(region.into());
        self
    }

    /// The bound on one request, the client's retries included (default
    /// [`DEFAULT_OPERATION_TIMEOUT`]); past it the operation answers `LockError::Timeout`.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// The lock.
    ///
    /// # Errors
    /// [`LockError::InvalidInput`] when neither a store nor a URL was given, for a URL that is
    /// not `s3://bucket[/prefix]` (or without the `aws` feature), a zero timeout, or an S3
    /// configuration `object_store` refuses.
    pub fn build(self) -> Result<ObjectStoreLock, LockError> {
        let timeout = self.timeout.unwrap_or(DEFAULT_OPERATION_TIMEOUT);
        if timeout.is_zero() {
            return Err(LockError::invalid(
                "the object store timeout must not be zero",
            ));
        }
        let (store, url_prefix) = match (&self.store, &self.url) {
            (Some(store), _) => (Arc::clone(store), String::new()),
            (None, Some(url)) => self.s3(url, timeout)?,
            (None, None) => {
                return Err(LockError::invalid(
                    "ObjectStoreLock::builder needs a store or an s3:// URL",
                ));
            }
        };
        let prefix = self.prefix.clone().unwrap_or(url_prefix);
        Ok(ObjectStoreLock::new(store, &prefix, timeout))
    }

    /// The S3 store of `url`, and the URL's prefix.
    #[cfg(feature = "aws")]
    fn s3(
        &self,
        url: &str,
        timeout: Duration,
    ) -> Result<(Arc<dyn ObjectStore>, String), LockError> {
        use object_store::aws::AmazonS3Builder;
        use object_store::{ClientOptions, RetryConfig};

        // The TLS of the S3 client is rustls without a bundled provider (see Cargo.toml): ring's
        // becomes the process default unless the application installed one (then that stays).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let (bucket, prefix) = parse_s3(url)?;
        let mut builder = AmazonS3Builder::from_env().with_bucket_name(bucket);
        let endpoint = self
            .endpoint
            .clone()
            .or_else(|| std::env::var("AWS_ENDPOINT_URL_S3").ok())
            .or_else(|| std::env::var("AWS_ENDPOINT_URL").ok());
        let mut options = ClientOptions::new()
            .with_timeout(timeout)
            .with_connect_timeout(timeout.min(Duration::from_secs(2)));
        if let Some(endpoint) = endpoint {
            // A local S3-compatible server is plain HTTP, path-style.
            if endpoint.starts_with("http://") {
                options = options.with_allow_http(true);
            }
            builder = builder.with_endpoint(endpoint);
        }
        if let Some((key, secret)) = &self.credentials {
            builder = builder
                .with_access_key_id(key)
                .with_secret_access_key(secret);
        }
        if let Some(region) = &self.region {
            builder = builder.with_region(region);
        }
        // The client's own retries stay within one request's bound, so a store that is down
        // answers within it, not after the client's default three minutes.
        let retry = RetryConfig {
            max_retries: 2,
            retry_timeout: timeout,
            ..RetryConfig::default()
        };
        let store = builder
            .with_client_options(options)
            .with_retry(retry)
            .build()
            .map_err(|e| LockError::invalid(format!("S3 configuration for {url:?}: {e}")))?;
        Ok((Arc::new(store), prefix.to_owned()))
    }

    /// Without the `aws` feature there is no S3 client.
    #[cfg(not(feature = "aws"))]
    fn s3(&self, url: &str, _: Duration) -> Result<(Arc<dyn ObjectStore>, String), LockError> {
        Err(LockError::invalid(format!(
            "{url:?}: s3:// URLs need lock-object-store's `aws` feature"
        )))
    }
}

/// `s3://bucket/prefix` → (`bucket`, `prefix`).
///
/// # Errors
/// [`LockError::InvalidInput`] for another scheme or no bucket.
pub fn parse_s3(url: &str) -> Result<(&str, &str), LockError> {
    let rest = url
        .strip_prefix("s3://")
        .ok_or_else(|| LockError::invalid(format!("{url:?} is not an s3://bucket/prefix URL")))?;
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    if bucket.is_empty() {
        return Err(LockError::invalid(format!("{url:?} names no bucket")));
    }
    Ok((bucket, prefix.trim_end_matches('/')))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s3_urls_split_into_bucket_and_prefix() {
        assert_eq!(parse_s3("s3://b/locks/app/").ok(), Some(("b", "locks/app")));
        assert_eq!(parse_s3("s3://b").ok(), Some(("b", "")));
        assert!(parse_s3("s3:///x").is_err());
        assert!(parse_s3("gs://b/x").is_err());
    }

    #[test]
    fn a_builder_needs_a_store_or_a_url() {
        assert!(matches!(
            ObjectStoreLock::builder().build(),
            Err(LockError::InvalidInput { .. })
        ));
    }
}
