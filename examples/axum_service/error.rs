//! The handlers' error type: lock failures arrive through `From<LockError>` (the attribute's
//! contract) and become HTTP statuses.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use distlock::{LockError, TimeoutPhase};

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
        let (status, message) = match &self {
            // Busy past the attribute's wait: someone else is settling this order.
            Self::Lock(LockError::Timeout {
                phase: TimeoutPhase::Wait,
                ..
            }) => (
                StatusCode::CONFLICT,
                "the order is being settled; try again".to_owned(),
            ),
            Self::Lock(LockError::Lost { .. }) => (
                StatusCode::SERVICE_UNAVAILABLE,
                "the order's lock was lost mid-way; nothing after that point ran".to_owned(),
            ),
            Self::Lock(error) if error.is_retryable() => (
                StatusCode::SERVICE_UNAVAILABLE,
                format!("lock backend: {error}"),
            ),
            Self::Lock(error) => (StatusCode::INTERNAL_SERVER_ERROR, format!("lock: {error}")),
            Self::StaleFence { fence, last } => (
                StatusCode::CONFLICT,
                format!("stale fencing token {fence} (last written {last}): write refused"),
            ),
        };
        (status, message + "\n").into_response()
    }
}
