//! From the etcd client's errors and our deadlines to [`LockError`].

use std::fmt;
use std::future::Future;
use std::time::Duration;

use lock_core::{LockError, Op, TimeoutPhase};
use tokio::time::Instant;

/// The label of every error and metric of this backend.
pub const BACKEND: &str = "etcd";

/// `future` bounded by `timeout`: its error mapped for `op`, or a timeout of `phase`.
pub(crate) async fn bounded<T>(
    op: Op,
    phase: TimeoutPhase,
    timeout: Duration,
    future: impl Future<Output = Result<T, etcd_client::Error>>,
) -> Result<T, LockError> {
    let started = Instant::now();
    match tokio::time::timeout(timeout, future).await {
        Ok(answer) => answer.map_err(|err| {
            if timed_out(&err) {
                LockError::Timeout {
                    phase,
                    elapsed: started.elapsed(),
                }
            } else {
                backend(op, err)
            }
        }),
        Err(_) => Err(LockError::Timeout {
            phase,
            elapsed: started.elapsed(),
        }),
    }
}

/// Whether the client gave up waiting itself (its connect or request timeout, which tonic
/// reports as a `Cancelled` status "Timeout expired", or a deadline): a timeout, as ours is,
/// told apart from a member that refused or failed.
fn timed_out(err: &etcd_client::Error) -> bool {
    match err {
        etcd_client::Error::GRpcStatus(status) => {
            status.code() == tonic::Code::DeadlineExceeded
                || (status.code() == tonic::Code::Cancelled
                    && status.message().contains("Timeout expired"))
        }
        _ => false,
    }
}

/// A client error as [`LockError::Backend`], retryable unless etcd refused the request itself
/// (bad credentials, no permission, an invalid argument).
pub(crate) fn backend(op: Op, err: etcd_client::Error) -> LockError {
    LockError::Backend {
        backend: BACKEND,
        op,
        retryable: retryable(&err),
        source: Box::new(EtcdError(err)),
    }
}

/// The etcd client's error, said in one line: the source of a [`LockError::Backend`] on etcd.
/// A transport failure's gRPC status prints its cause in tonic's debug form; this says what
/// happened (`tcp connect error: Connection refused (os error 111)`), and
/// [`client_error`](EtcdError::client_error) or `source()` give the client's own error.
#[derive(Debug)]
pub struct EtcdError(etcd_client::Error);

impl EtcdError {
    /// The etcd client's error.
    #[must_use]
    pub fn client_error(&self) -> &etcd_client::Error {
        &self.0
    }
}

impl From<etcd_client::Error> for EtcdError {
    fn from(error: etcd_client::Error) -> Self {
        Self(error)
    }
}

impl fmt::Display for EtcdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let etcd_client::Error::GRpcStatus(status) = &self.0 else {
            return write!(f, "{}", self.0);
        };
        let mut cause = std::error::Error::source(status);
        // Bounded: a cause chain is short, but a cyclic one must not hang us.
        for _ in 0..16 {
            let Some(error) = cause else { break };
            if let Some(io) = error.downcast_ref::<std::io::Error>() {
                return write!(f, "{}: {io}", status.message());
            }
            cause = error.source();
        }
        write!(f, "{} ({:?})", status.message(), status.code())
    }
}

impl std::error::Error for EtcdError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0)
    }
}

/// Whether the same request may succeed later: transport failures, an unavailable member, no
/// leader yet, a deadline; not a refusal of the request as such.
fn retryable(err: &etcd_client::Error) -> bool {
    use tonic::Code;
    match err {
        etcd_client::Error::GRpcStatus(status) => !matches!(
            status.code(),
            Code::Unauthenticated
                | Code::PermissionDenied
                | Code::InvalidArgument
                | Code::FailedPrecondition
                | Code::Unimplemented
                | Code::OutOfRange
        ),
        etcd_client::Error::InvalidArgs(_)
        | etcd_client::Error::InvalidUri(_)
        | etcd_client::Error::Utf8Error(_)
        | etcd_client::Error::InvalidMetadataValue(_)
        | etcd_client::Error::EndpointsNotManaged => false,
        _ => true,
    }
}

/// A protocol answer that lacks what etcd always sends (a header, a response per operation).
pub(crate) fn malformed(op: Op, what: &str) -> LockError {
    LockError::Backend {
        backend: BACKEND,
        op,
        retryable: true,
        source: format!("etcd answered without {what}").into(),
    }
}
