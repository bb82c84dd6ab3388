//! [`Members`] as the tower `Service` etcd-client sends its gRPC requests through: each
//! request goes to the member the roster picks, and what it comes to is reported back.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use tonic::body::Body;
use tower::{BoxError, Service, ServiceExt};

use super::{Members, Outcome};

type Request = http::Request<Body>;
type Response = http::Response<Body>;

impl Service<Request> for Members {
    type Response = Response;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Response, BoxError>> + Send>>;

    /// Always ready: the member is chosen per request, and each member's channel queues its
    /// requests itself.
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let route = self.route();
        let mut pending = Pending {
            members: self.clone(),
            member: route.member,
            generation: route.generation,
            sent: Instant::now(),
            settled: false,
        };
        let mut channel = route.channel;
        Box::pin(async move {
            let answer = match channel.ready().await {
                Ok(ready) => ready.call(request).await,
                Err(err) => Err(err),
            };
            pending.settle(outcome(&answer));
            answer.map_err(BoxError::from)
        })
    }
}

/// One request on its way: reports what it came to once, or, dropped unanswered after the
/// members' `abandoned_after` (its caller timed out), that the member did not answer.
struct Pending {
    members: Members,
    member: usize,
    generation: u64,
    sent: Instant,
    settled: bool,
}

impl Pending {
    fn settle(&mut self, outcome: Outcome) {
        self.settled = true;
        self.members.report(self.member, self.generation, outcome);
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        // Dropped early, the caller gave up for reasons of its own (a cancelled acquire): no
        // judgement on the member.
        if !self.settled && self.sent.elapsed() >= self.members.shared.abandoned_after {
            self.members
                .report(self.member, self.generation, Outcome::Unreachable);
        }
    }
}

/// What an answer tells of its member: a transport failure (no connection, a broken one, the
/// channel's own timeout) is [`Outcome::Unreachable`]; a gRPC `Unavailable` status sent at
/// once in the headers (etcd's "no leader", "leader changed") or an HTTP error status is
/// [`Outcome::Unready`]; anything else is an answer.
fn outcome(answer: &Result<Response, tonic::transport::Error>) -> Outcome {
    let Ok(response) = answer else {
        return Outcome::Unreachable;
    };
    let unavailable = response.headers().get("grpc-status").is_some_and(|status| {
        tonic::Code::from_bytes(status.as_bytes()) == tonic::Code::Unavailable
    });
    if unavailable || !response.status().is_success() {
        Outcome::Unready
    } else {
        Outcome::Answered
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(
        status: http::StatusCode,
        grpc: Option<&str>,
    ) -> Result<Response, tonic::transport::Error> {
        let mut response = http::Response::builder().status(status);
        if let Some(code) = grpc {
            response = response.header("grpc-status", code);
        }
        Ok(response.body(Body::empty()).expect("a valid response"))
    }

    #[test]
    fn answers_are_told_apart() {
        assert_eq!(
            outcome(&answer(http::StatusCode::OK, None)),
            Outcome::Answered
        );
        // A refusal (permission denied) is still an answer from a member that serves.
        assert_eq!(
            outcome(&answer(http::StatusCode::OK, Some("7"))),
            Outcome::Answered
        );
        // etcd's "no leader": reachable, not serving.
        assert_eq!(
            outcome(&answer(http::StatusCode::OK, Some("14"))),
            Outcome::Unready
        );
        assert_eq!(
            outcome(&answer(http::StatusCode::SERVICE_UNAVAILABLE, None)),
            Outcome::Unready
        );
    }
}
