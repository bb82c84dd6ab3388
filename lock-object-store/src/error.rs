//! From `object_store`'s errors to [`LockError`]s, and the errors of this backend's own.

use std::future::Future;
use std::time::Duration;

use lock_core::{LockError, Op, TimeoutPhase};
use tokio::time::Instant;

/// The label of this backend in errors, logs and metrics.
pub const BACKEND: &str = "object-store";

/// What went wrong with the store, beyond what `object_store`'s own error says: the `source`
/// of a [`LockError::Backend`] this backend raises itself.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ObjectStoreError {
    /// The bucket (or container) is missing: the store answered "not found" to a write, or
    /// `NoSuchBucket` to a listing. Not retryable until someone creates it. The message names
    /// the store and the object; the store's own answer is the `source`.
    #[error("the bucket of {store} is missing ({key:?} answered not found): create it first")]
    BucketMissing {
        /// The store, as `object_store` prints it.
        store: String,
        /// The object written.
        key: String,
        /// The store's answer.
        #[source]
        source: object_store::Error,
    },
    /// The store refused the credentials (wrong key, expired token, no permission). The
    /// message names the store and the store's error code (`SignatureDoesNotMatch`,
    /// `InvalidAccessKeyId`, `AccessDenied`); its whole answer is the `source`.
    #[error(
        "{store} refused the credentials ({}): check the access key and secret, and the permissions",
        code_of(source)
    )]
    Credentials {
        /// The store, as `object_store` prints it.
        store: String,
        /// The store's answer.
        #[source]
        source: object_store::Error,
    },
    /// A URL given to the builder cannot be used.
    #[error("{0}")]
    Url(String),
}

/// Runs one request to the store, bounded by `timeout`.
pub(crate) async fn timed<T>(
    timeout: Duration,
    request: impl Future<Output = object_store::Result<T>>,
) -> Result<object_store::Result<T>, LockError> {
    let started = Instant::now();
    tokio::time::timeout(timeout, request)
        .await
        .map_err(|_| LockError::Timeout {
            phase: TimeoutPhase::Command,
            elapsed: started.elapsed(),
        })
}

/// `error` as the kind of error its store's answer says it is: `object_store` reports some
/// refusals (a listing's 403, `NoSuchBucket`) as a generic error whose text is the S3 answer.
fn classified(error: object_store::Error) -> object_store::Error {
    let object_store::Error::Generic { store, source } = error else {
        return error;
    };
    let text = source.to_string();
    let refused = [
        "SignatureDoesNotMatch",
        "InvalidAccessKeyId",
        "AccessDenied",
        "403 Forbidden",
    ];
    if refused.iter().any(|code| text.contains(code)) {
        object_store::Error::PermissionDenied {
            path: store.to_owned(),
            source,
        }
    } else if text.contains("NoSuchBucket") {
        object_store::Error::NotFound {
            path: store.to_owned(),
            source,
        }
    } else {
        object_store::Error::Generic { store, source }
    }
}

/// The S3 error code in a store's answer (`<Code>…</Code>`), else its first line.
fn code_of(error: &object_store::Error) -> String {
    let mut text = error.to_string();
    let mut cause = std::error::Error::source(error);
    // Bounded: a cause chain is short, but a cyclic one must not hang us.
    for _ in 0..16 {
        let Some(next) = cause else { break };
        text.push('\n');
        text.push_str(&next.to_string());
        cause = next.source();
    }
    let code = text
        .split_once("<Code>")
        .and_then(|(_, rest)| rest.split_once("</Code>"))
        .map(|(code, _)| code.to_owned());
    code.unwrap_or_else(|| {
        text.lines()
            .next()
            .unwrap_or_default()
            .chars()
            .take(120)
            .collect()
    })
}

/// Whether the HTTP client gave up waiting for the store's answer (its request timeout).
fn timed_out(error: &object_store::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(cause) = source {
        if let Some(http) = cause.downcast_ref::<object_store::client::HttpError>()
            && http.kind() == object_store::client::HttpErrorKind::Timeout
        {
            return true;
        }
        source = cause.source();
    }
    false
}

/// `error` of `op` on the store `store` (its `Display`) at `key` as a [`LockError`]: the
/// client's request timeout ([`LockError::Timeout`], after `timeout`); the credentials and a
/// missing bucket, not retryable; the rest (connection refused, 5xx, throttling after the
/// client's own retries), retryable.
pub(crate) fn to_lock_error(
    op: Op,
    store: &str,
    key: &str,
    error: object_store::Error,
    timeout: Duration,
) -> LockError {
    use object_store::Error as E;
    let error = classified(error);
    if timed_out(&error) {
        // The store accepted the connection and never answered within the client's timeout
        // (`timeout`, the lock's operation timeout): a timeout, told apart from a store that
        // refused or failed.
        return LockError::Timeout {
            phase: TimeoutPhase::Command,
            elapsed: timeout,
        };
    }
    let (retryable, source): (bool, lock_core::BoxError) = match error {
        E::PermissionDenied { .. } | E::Unauthenticated { .. } => (
            false,
            Box::new(ObjectStoreError::Credentials {
                store: store.to_owned(),
                source: error,
            }),
        ),
        // A write that finds no object answers "not found" only when the bucket itself is
        // missing (S3's NoSuchBucket is a 404).
        E::NotFound { .. } => (
            false,
            Box::new(ObjectStoreError::BucketMissing {
                store: store.to_owned(),
                key: key.to_owned(),
                source: error,
            }),
        ),
        E::InvalidPath { .. } | E::NotSupported { .. } | E::NotImplemented { .. } => {
            (false, Box::new(error))
        }
        other => (true, Box::new(other)),
    };
    LockError::Backend {
        backend: BACKEND,
        op,
        retryable,
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(e: &LockError) -> Option<&ObjectStoreError> {
        match e {
            LockError::Backend { source, .. } => source.downcast_ref(),
            _ => None,
        }
    }

    #[test]
    fn a_write_answered_not_found_is_a_missing_bucket() {
        let e = object_store::Error::NotFound {
            path: "locks/job".into(),
            source: "NoSuchBucket".into(),
        };
        let error = to_lock_error(Op::Acquire, "AmazonS3(b)", "locks/job", e, Duration::ZERO);
        assert!(!error.is_retryable());
        assert!(matches!(
            source(&error),
            Some(ObjectStoreError::BucketMissing { .. })
        ));
    }

    #[test]
    fn refused_credentials_are_not_retryable() {
        let e = object_store::Error::PermissionDenied {
            path: "locks/job".into(),
            source: "SignatureDoesNotMatch".into(),
        };
        let error = to_lock_error(Op::Acquire, "AmazonS3(b)", "locks/job", e, Duration::ZERO);
        assert!(!error.is_retryable());
        assert!(matches!(
            source(&error),
            Some(ObjectStoreError::Credentials { .. })
        ));
    }
}
