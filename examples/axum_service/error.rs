//! The handlers' error type: lock failures arrive through `From<LockError>` (the attribute's
//! contract) and become HTTP responses through distlock's own `IntoResponse` for `LockError`
//! (feature `axum`): 409 with `Retry-After` when the order's lock stayed busy past the wait,
//! 503 with `Retry-After` when Redis is unreachable, 500 when the lease was lost.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use distlock::LockError;

#[derive(Debug)]
pub(crate) enum AppError {
    Lock(LockError),
    StaleFence { fence: u64, last: u64 },
}

impl From<LockError> for AppError {
    fn from(error: LockError) -> Self {
        Self::Lock(error)
    }
}

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        match self {
            Self::Lock(error) => {
                // The response says nothing about the backend: the details go to the log.
                if !matches!(error, LockError::Timeout { .. } | LockError::Busy { .. }) {
                    eprintln!("lock error: {error}");
                }
                error.into_response()
            }
            Self::StaleFence { fence, last } => (
                StatusCode::CONFLICT,
                format!("stale fencing token {fence} (last written {last}): write refused\n"),
            )
                .into_response(),
        }
    }
}
