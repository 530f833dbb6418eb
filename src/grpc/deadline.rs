//! The deadline of a gRPC call: the client's `grpc-timeout` header, capped at the server's own
//! bound (`http.request_timeout`). A call still running then is dropped and answered with
//! `DEADLINE_EXCEEDED` (a command already queued still commits: its retry under the same
//! `command_id` answers the stored outcome, as over HTTP). The deadline goes in the request's
//! extensions ([`CallDeadline`]): a call forwarded to its room's owner carries it there.
//!
//! tonic's own transport answers an expired `grpc-timeout` with `CANCELLED`; the service is
//! served through the HTTP API's accept loop (`http::server`) instead, and this layer gives
//! the standard status.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use axum::http::{HeaderMap, Request, Response};
use pin_project_lite::pin_project;
use tokio::time::{Instant, Sleep};
use tower::{Layer, Service};

/// The `grpc-timeout` request header.
pub const GRPC_TIMEOUT: &str = "grpc-timeout";

/// When a call's deadline passes, in its request's extensions: a call forwarded to its room's
/// owner carries the time left on, and the owner gives up then too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallDeadline(pub Instant);

/// Applies [`Deadline`] with `max` as the longest allowed call.
#[derive(Debug, Clone, Copy)]
pub struct DeadlineLayer {
    max: Duration,
}

impl DeadlineLayer {
    /// Calls run at most `max`, or less when the client asks.
    pub fn new(max: Duration) -> Self {
        Self { max }
    }
}

impl<S> Layer<S> for DeadlineLayer {
    type Service = Deadline<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Deadline { inner, max: self.max }
    }
}

/// Bounds each call by its deadline; see the module docs.
#[derive(Debug, Clone)]
pub struct Deadline<S> {
    inner: S,
    max: Duration,
}

impl<S, B, ResBody> Service<Request<B>> for Deadline<S>
where
    S: Service<Request<B>, Response = Response<ResBody>>,
    ResBody: Default,
{
    type Response = Response<ResBody>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<B>) -> Self::Future {
        let timeout = client_timeout(request.headers()).map_or(self.max, |t| t.min(self.max));
        let deadline = Instant::now() + timeout;
        request.extensions_mut().insert(CallDeadline(deadline));
        ResponseFuture { inner: self.inner.call(request), sleep: tokio::time::sleep_until(deadline) }
    }
}

pin_project! {
    /// The answer of [`Deadline`]: the inner answer, or `DEADLINE_EXCEEDED` once it expires.
    pub struct ResponseFuture<F> {
        #[pin]
        inner: F,
        #[pin]
        sleep: Sleep,
    }
}

impl<F, ResBody, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<Response<ResBody>, E>>,
    ResBody: Default,
{
    type Output = Result<Response<ResBody>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if let Poll::Ready(answer) = this.inner.poll(cx) {
            return Poll::Ready(answer);
        }
        ready!(this.sleep.poll(cx));
        let status = tonic::Status::deadline_exceeded(
            "the deadline passed before the answer; a command may still apply: retry it with the same command_id",
        );
        Poll::Ready(Ok(status.into_http()))
    }
}

/// The client's deadline from `grpc-timeout` (`<1-8 digits><H|M|S|m|u|n>`); `None` when
/// absent or malformed (the server's own bound applies then).
pub fn client_timeout(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get(GRPC_TIMEOUT)?.to_str().ok()?;
    if value.len() < 2 || value.len() > 9 {
        return None;
    }
    let (digits, unit) = value.split_at(value.len() - 1);
    let amount: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(amount.checked_mul(3600)?),
        "M" => Duration::from_secs(amount.checked_mul(60)?),
        "S" => Duration::from_secs(amount),
        "m" => Duration::from_millis(amount),
        "u" => Duration::from_micros(amount),
        "n" => Duration::from_nanos(amount),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(value: &str) -> Option<Duration> {
        let mut headers = HeaderMap::new();
        headers.insert(GRPC_TIMEOUT, value.parse().unwrap());
        client_timeout(&headers)
    }

    #[test]
    fn grpc_timeout_units_parse_and_garbage_is_ignored() {
        assert_eq!(parse("2H"), Some(Duration::from_secs(7200)));
        assert_eq!(parse("3M"), Some(Duration::from_secs(180)));
        assert_eq!(parse("5S"), Some(Duration::from_secs(5)));
        assert_eq!(parse("250m"), Some(Duration::from_millis(250)));
        assert_eq!(parse("7u"), Some(Duration::from_micros(7)));
        assert_eq!(parse("9n"), Some(Duration::from_nanos(9)));
        for bad in ["", "S", "5", "5x", "-5S", "123456789S", "1.5S"] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_past_its_deadline_answers_deadline_exceeded() {
        let slow = tower::service_fn(|_: Request<()>| async {
            tokio::time::sleep(Duration::from_secs(60)).await;
            Ok::<_, std::convert::Infallible>(Response::new(String::new()))
        });
        let mut service = DeadlineLayer::new(Duration::from_secs(10)).layer(slow);
        let request = Request::builder().header(GRPC_TIMEOUT, "100m").body(()).unwrap();
        let answer = service.call(request).await.unwrap();
        assert_eq!(answer.headers()["grpc-status"], "4");
        // Without a client deadline the server's bound applies.
        let answer = service.call(Request::new(())).await.unwrap();
        assert_eq!(answer.headers()["grpc-status"], "4");
    }

    #[tokio::test(start_paused = true)]
    async fn the_calls_deadline_is_in_its_extensions() {
        let deadline = |request: Request<()>| async move {
            let deadline = request.extensions().get::<CallDeadline>().copied();
            Ok::<_, std::convert::Infallible>(Response::new(format!("{deadline:?}")))
        };
        let mut service = DeadlineLayer::new(Duration::from_secs(10)).layer(tower::service_fn(deadline));
        let request = Request::builder().header(GRPC_TIMEOUT, "250m").body(()).unwrap();
        let expected = CallDeadline(Instant::now() + Duration::from_millis(250));
        assert_eq!(service.call(request).await.unwrap().into_body(), format!("{:?}", Some(expected)));
        let capped = CallDeadline(Instant::now() + Duration::from_secs(10));
        assert_eq!(service.call(Request::new(())).await.unwrap().into_body(), format!("{:?}", Some(capped)));
    }
}
