//! The public API's edge: what protects the service from a slow handler, a flood, or a bug.
//!
//! - a request timeout (`http.request_timeout`): a `/v1/*` request not answered in time gets
//!   503 `request_timeout`. A command cut off this way still commits if it was queued (its
//!   room's drain task owns it), so the client retries with the same `command_id` and gets the
//!   stored answer;
//! - load shedding (`http.max_in_flight`): beyond that many `/v1/*` requests in flight, a new
//!   one gets 503 `overloaded` at once instead of queueing, so a flood degrades into fast
//!   refusals, not a memory climb;
//! - a panicking handler answers 500 `internal` (logged, counted) and the process keeps serving.
//!
//! The request id rules and the report of a panic are those of both APIs
//! ([`crate::api::edge`]).

use std::any::Any;
use std::time::Duration;

use axum::error_handling::HandleErrorLayer;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use tower::layer::util::{Identity, Stack};
use tower::limit::GlobalConcurrencyLimitLayer;
use tower::load_shed::LoadShedLayer;
use tower::load_shed::error::Overloaded;
use tower::timeout::TimeoutLayer;
use tower::timeout::error::Elapsed;
use tower::{BoxError, ServiceBuilder};

use crate::api::ApiError;
use crate::api::edge::report_panic;
use crate::telemetry::names;

/// The layers [`layer`] returns, outermost last.
pub type EdgeLayer = ServiceBuilder<
    Stack<
        TimeoutLayer,
        Stack<
            GlobalConcurrencyLimitLayer,
            Stack<LoadShedLayer, Stack<HandleErrorLayer<HandleEdgeError, ()>, Identity>>,
        >,
    >,
>;

/// The edge layers of `/v1/*`: outermost the error mapping, then load shedding over a
/// concurrency limit shared by every route, then the request timeout.
pub fn layer(request_timeout: Duration, max_in_flight: usize) -> EdgeLayer {
    ServiceBuilder::new()
        .layer(HandleErrorLayer::new(handle_error as HandleEdgeError))
        .load_shed()
        .layer(GlobalConcurrencyLimitLayer::new(max_in_flight))
        .timeout(request_timeout)
}

/// The error handler's type, named so that [`layer`] can be returned.
pub type HandleEdgeError = fn(BoxError) -> std::future::Ready<ApiError>;

/// Maps an edge error onto the JSON error body.
fn handle_error(error: BoxError) -> std::future::Ready<ApiError> {
    let answer = if error.is::<Overloaded>() {
        metrics::counter!(names::HTTP_REQUESTS_SHED_TOTAL).increment(1);
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "overloaded",
            "too many requests in flight; retry shortly",
        )
    } else if error.is::<Elapsed>() {
        metrics::counter!(names::HTTP_REQUEST_TIMEOUTS_TOTAL).increment(1);
        ApiError::request_timeout()
    } else {
        tracing::error!(%error, "Request failed in the HTTP edge");
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", "internal error")
    };
    std::future::ready(answer)
}

/// The answer to a panicking handler: 500 JSON, an error log line and a counter.
pub fn panic_response(panic: Box<dyn Any + Send + 'static>) -> Response {
    report_panic("Request", "500", panic.as_ref());
    ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", "internal error").into_response()
}
