//! What the edges of both APIs share: the rules of a request id (SPEC §13.1: the same on HTTP
//! and gRPC) and the report of a handler's caught panic. Each API's own edge (timeouts, load
//! shedding, the answer to a panic) is its own (`http::edge`, `grpc::edge`).

use std::any::Any;

use crate::telemetry::names;

/// The `x-request-id` header.
pub const REQUEST_ID: &str = "x-request-id";

/// A request's id, HTTP and gRPC alike (SPEC §13.1): its `x-request-id` when that is a valid
/// [`RequestId`](crate::domain::RequestId) (1–128 printable ASCII characters), else a new
/// UUIDv7 — an id the command log and every event can hold, whatever the client sent.
pub fn request_id(header: Option<&str>) -> String {
    match header.map(crate::domain::RequestId::parse) {
        Some(Ok(id)) => id.into(),
        _ => uuid::Uuid::now_v7().to_string(),
    }
}

/// Drops an `x-request-id` that is not a valid request id, so the request-id layer just
/// outside sets a fresh one, and the span, the handler and the echoed answer all carry that.
pub fn drop_invalid_request_id<B>(mut request: ::http::Request<B>) -> ::http::Request<B> {
    let valid = request
        .headers()
        .get(REQUEST_ID)
        .is_none_or(|v| v.to_str().is_ok_and(|v| crate::domain::RequestId::parse(v).is_ok()));
    if !valid {
        request.headers_mut().remove(REQUEST_ID);
    }
    request
}

/// `span`, an edge's (`http` or `grpc`), continuing the
/// caller's W3C trace when traces are exported (SPEC §13.4); its log lines carry `trace_id` and
/// `span_id` then.
pub fn continue_trace(span: tracing::Span, headers: &::http::HeaderMap) -> tracing::Span {
    crate::telemetry::traces::continue_trace(&span, headers);
    span
}

/// Answers the request's trace context (`traceparent`, `tracestate`) when traces are exported:
/// the span the caller's trace continued in, so it can find this request's spans.
pub fn answer_trace<B>(mut response: ::http::Response<B>) -> ::http::Response<B> {
    crate::telemetry::traces::inject_current(response.headers_mut());
    response
}

/// Logs a caught panic of a `handler` (its text stays in the log: the client gets only
/// "internal error") with what it was `answered`, and counts it.
pub fn report_panic(handler: &str, answered: &str, panic: &(dyn Any + Send + 'static)) {
    let detail = panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-string panic payload".to_owned());
    tracing::error!(panic = %detail, "{handler} handler panicked; answered {answered}");
    metrics::counter!(names::HTTP_PANICS_TOTAL).increment(1);
}
