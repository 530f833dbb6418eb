//! HTTP server metrics: requests by method, matched route and status class, and their
//! latency. Labels are bounded: the route template (`/v1/rooms/{room_id}/join`), never a path.
//! [`register_zero`] exports the series of the public API at 0 before its first request.

use axum::extract::{MatchedPath, Request};
use axum::middleware::Next;
use axum::response::Response;

use crate::telemetry::names;

/// Middleware (installed with `route_layer`, so the matched route is known).
pub async fn track(request: Request, next: Next) -> Response {
    let started = tokio::time::Instant::now();
    let route = request.extensions().get::<MatchedPath>().map(|p| p.as_str().to_owned()).unwrap_or_default();
    let method = request.method().as_str().to_owned();
    let response = next.run(request).await;
    let status = match response.status().as_u16() {
        100..=199 => "1xx",
        200..=299 => "2xx",
        300..=399 => "3xx",
        400..=499 => "4xx",
        _ => "5xx",
    };
    metrics::histogram!(
        names::HTTP_REQUEST_DURATION_SECONDS,
        names::LABEL_METHOD => method.clone(),
        names::LABEL_ROUTE => route.clone()
    )
    .record(started.elapsed().as_secs_f64());
    metrics::counter!(
        names::HTTP_REQUESTS_TOTAL,
        names::LABEL_METHOD => method,
        names::LABEL_ROUTE => route,
        names::LABEL_STATUS => status
    )
    .increment(1);
    response
}

/// The status classes whose request counts are exported at 0: success and both error classes
/// (the dashboard's error panel reads `4xx` and `5xx`).
const ZERO_STATUSES: [&str; 3] = ["2xx", "4xx", "5xx"];

/// Exports `http_requests_total` at 0 for every `(method, route)` of `routes` and status class
/// (2xx, 4xx, 5xx), and an empty `http_request_duration_seconds` for each.
pub fn register_zero(routes: &[(&'static str, &'static str)]) {
    for &(method, route) in routes {
        let _ = metrics::histogram!(
            names::HTTP_REQUEST_DURATION_SECONDS,
            names::LABEL_METHOD => method,
            names::LABEL_ROUTE => route
        );
        for status in ZERO_STATUSES {
            metrics::counter!(
                names::HTTP_REQUESTS_TOTAL,
                names::LABEL_METHOD => method,
                names::LABEL_ROUTE => route,
                names::LABEL_STATUS => status
            )
            .increment(0);
        }
    }
}
