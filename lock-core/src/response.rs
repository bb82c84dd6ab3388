//! `LockError` as an HTTP response for axum handlers (feature `axum`).
//!
//! The impl lives here, beside `LockError`, because the orphan rule allows it nowhere else: the
//! `distlock` facade owns neither the trait nor the type. It depends on `axum-core` (the crate
//! that defines `IntoResponse`, which `axum` re-exports), not on `axum` itself.

use std::time::Duration;

use axum_core::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};

use crate::{LockError, TimeoutPhase};

/// The `Retry-After` of an answer that trying again may fix, when the error tells nothing
/// better: 1 s.
const RETRY_SOON: Duration = Duration::from_secs(1);

/// The response for a lock failure, as every axum service would write it:
///
/// | error | status | `Retry-After` | body |
/// |---|---|---|---|
/// | [`Busy`](LockError::Busy), [`Timeout`](LockError::Timeout) waiting for the lock | 409 Conflict | the holder's remaining TTL (rounded up to whole seconds) when known, else 1 s | `the resource is locked by another request; try again` |
/// | [`Timeout`](LockError::Timeout) connecting or on a command, retryable [`Backend`](LockError::Backend) or [`QuorumNotReached`](LockError::QuorumNotReached) | 503 Service Unavailable | 1 s | `the lock service is unavailable; try again` |
/// | [`Lost`](LockError::Lost), [`NotOwned`](LockError::NotOwned) | 500 Internal Server Error | — | `the lock was lost before the work finished` |
/// | anything else (invalid input, a wrong-type key, a non-retryable backend error) | 500 Internal Server Error | — | `lock error` |
///
/// The body is plain text and says nothing about the backend (no addresses, no error
/// replies): log the error yourself if you need its details, before converting it.
///
/// 409 rather than 503 for a busy lock: the service is up, the *resource* is busy with another
/// request, and the client may retry after the `Retry-After` delay. Map it differently by
/// matching on the error first and calling `into_response` for the rest.
impl IntoResponse for LockError {
    fn into_response(self) -> Response {
        let (status, retry_after, body) = match &self {
            LockError::Busy { holder_ttl, .. } => (
                StatusCode::CONFLICT,
                Some(holder_ttl.unwrap_or(RETRY_SOON)),
                BUSY,
            ),
            LockError::Timeout {
                phase: TimeoutPhase::Wait,
                ..
            } => (StatusCode::CONFLICT, Some(RETRY_SOON), BUSY),
            LockError::Lost { .. } | LockError::NotOwned { .. } | LockError::Fenced { .. } => (
                StatusCode::INTERNAL_SERVER_ERROR,
                None,
                "the lock was lost before the work finished\n",
            ),
            LockError::Stopped { .. } => (
                StatusCode::SERVICE_UNAVAILABLE,
                Some(RETRY_SOON),
                "the service is shutting down; try again\n",
            ),
            error if error.is_retryable() => (
                StatusCode::SERVICE_UNAVAILABLE,
                Some(RETRY_SOON),
                "the lock service is unavailable; try again\n",
            ),
            _ => (StatusCode::INTERNAL_SERVER_ERROR, None, "lock error\n"),
        };
        let mut response = (status, body).into_response();
        if let Some(after) = retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(whole_seconds(after)));
        }
        response
    }
}

const BUSY: &str = "the resource is locked by another request; try again\n";

/// `after` in whole seconds, rounded up, at least 1 (`Retry-After: 0` would invite a retry
/// storm).
fn whole_seconds(after: Duration) -> u64 {
    let seconds = after.as_secs() + u64::from(after.subsec_nanos() > 0);
    seconds.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(error: LockError) -> (u16, Option<String>) {
        let response = error.into_response();
        let retry_after = response
            .headers()
            .get(header::RETRY_AFTER)
            .map(|v| v.to_str().expect("ascii").to_owned());
        (response.status().as_u16(), retry_after)
    }

    #[test]
    fn each_error_gets_its_status() {
        let busy = |ttl| LockError::Busy {
            name: "n".into(),
            holder_ttl: ttl,
        };
        assert_eq!(
            answer(busy(Some(Duration::from_millis(2_300)))),
            (409, Some("3".into()))
        );
        assert_eq!(answer(busy(None)), (409, Some("1".into())));
        let timeout = |phase| LockError::Timeout {
            phase,
            elapsed: Duration::from_secs(2),
        };
        assert_eq!(answer(timeout(TimeoutPhase::Wait)), (409, Some("1".into())));
        assert_eq!(
            answer(timeout(TimeoutPhase::Command)),
            (503, Some("1".into()))
        );
        let backend = |retryable| LockError::Backend {
            backend: "redis",
            op: crate::Op::Acquire,
            retryable,
            source: "down".into(),
        };
        assert_eq!(answer(backend(true)), (503, Some("1".into())));
        assert_eq!(answer(backend(false)), (500, None));
        assert_eq!(answer(LockError::Lost { name: "n".into() }), (500, None));
        assert_eq!(answer(LockError::invalid("empty name")), (500, None));
    }

    #[test]
    fn retry_after_rounds_up_to_at_least_a_second() {
        assert_eq!(whole_seconds(Duration::ZERO), 1);
        assert_eq!(whole_seconds(Duration::from_millis(1)), 1);
        assert_eq!(whole_seconds(Duration::from_secs(2)), 2);
        assert_eq!(whole_seconds(Duration::from_millis(2_001)), 3);
    }
}
