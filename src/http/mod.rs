//! The HTTP API (axum) on two listeners:
//!
//! - the public one ([`public_router`]): room commands and snapshots (`/v1/*`), `/healthz`,
//!   `/readyz`, and in a cluster the owner's end of the hop ([`hop`]). `/v1/*` and the hop sit
//!   behind the edge ([`edge`]): a request timeout and load shedding;
//! - the admin one ([`admin_router`]): the outbox admin routes and `/metrics`, behind an
//!   optional bearer token ([`auth`]).
//!
//! Both answer unknown routes and methods with the JSON error body, and turn a panicking
//! handler into a 500 JSON answer while the process keeps serving. The routers are pure
//! builders, tested with `oneshot`; [`server`] serves them (and the gRPC router, over HTTP/2).
//!
//! What is HTTP's lives here: routes, extractors, the JSON error body ([`error`]: how an
//! [`ApiError`] answers), the edge, the accept loop. What the HTTP and gRPC APIs share (the
//! state, the neutral request and its serving here or at a room's owner, the error itself,
//! readiness's ping, the request id rules) is [`crate::api`]'s; this module and the gRPC API
//! (`src/grpc`) do not import each other.

pub mod admin;
pub mod auth;
pub mod caller;
pub mod edge;
pub mod error;
pub mod extract;
pub mod hop;
pub mod metrics;
pub mod moderation;
pub mod rooms;
pub mod seats;
pub mod server;

use std::time::Duration;

use axum::Router;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::TraceLayer;

use crate::api::{ApiError, AppState, BATCH_HEARTBEAT_BYTES};
use crate::config::HttpSettings;
use crate::secret::Secret;

/// The limits of the public router.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PublicOptions {
    /// Largest request body (413 above it).
    pub body_limit: usize,
    /// A `/v1/*` request not answered in this time gets 503 `request_timeout`.
    pub request_timeout: Duration,
    /// Most `/v1/*` requests handled at once; beyond it, 503 `overloaded` at once.
    pub max_in_flight: usize,
}

impl From<&HttpSettings> for PublicOptions {
    fn from(http: &HttpSettings) -> Self {
        Self {
            body_limit: http.body_limit_bytes,
            request_timeout: http.request_timeout,
            max_in_flight: http.max_in_flight,
        }
    }
}

impl Default for PublicOptions {
    /// The defaults of `http.*`.
    fn default() -> Self {
        Self { body_limit: 65_536, request_timeout: Duration::from_secs(10), max_in_flight: 512 }
    }
}

/// The routes of the public API, `(method, template)`, as [`public_router`] declares them:
/// their request series are exported at 0 from startup ([`metrics::register_zero`]). The
/// test `api::docs` fails when it and the router differ.
pub const V1_ROUTES: [(&str, &str); 20] = [
    ("POST", "/v1/rooms"),
    ("GET", "/v1/rooms/{room_id}"),
    ("POST", "/v1/rooms/{room_id}/join"),
    ("POST", "/v1/rooms/{room_id}/leave"),
    ("POST", "/v1/rooms/{room_id}/gifts"),
    ("POST", "/v1/rooms/{room_id}/close"),
    ("POST", "/v1/rooms/{room_id}/heartbeat"),
    ("POST", "/v1/rooms/{room_id}/heartbeats"),
    ("GET", "/v1/rooms/{room_id}/members"),
    ("GET", "/v1/rooms/{room_id}/events"),
    ("POST", "/v1/rooms/{room_id}/admins"),
    ("POST", "/v1/rooms/{room_id}/mutes"),
    ("POST", "/v1/rooms/{room_id}/kicks"),
    ("POST", "/v1/rooms/{room_id}/unban"),
    ("POST", "/v1/rooms/{room_id}/mute_all"),
    ("POST", "/v1/rooms/{room_id}/info"),
    ("POST", "/v1/rooms/{room_id}/attributes"),
    ("GET", "/v1/rooms/{room_id}/moderation"),
    ("GET", "/v1/rooms/{room_id}/seats"),
    ("POST", "/v1/rooms/{room_id}/seats/{action}"),
];

/// The public listener's router: `/v1/*` behind the edge, plus `/healthz` and `/readyz`.
pub fn public_router(state: AppState, options: PublicOptions) -> Router {
    let v1 = Router::new()
        .route("/v1/rooms", post(rooms::create))
        .route("/v1/rooms/{room_id}", get(rooms::get))
        .route("/v1/rooms/{room_id}/join", post(rooms::join))
        .route("/v1/rooms/{room_id}/leave", post(rooms::leave))
        .route("/v1/rooms/{room_id}/gifts", post(rooms::gift))
        .route("/v1/rooms/{room_id}/close", post(rooms::close))
        .route("/v1/rooms/{room_id}/heartbeat", post(rooms::heartbeat))
        .route(
            "/v1/rooms/{room_id}/heartbeats",
            post(rooms::heartbeats)
                .layer(DefaultBodyLimit::max(options.body_limit.max(BATCH_HEARTBEAT_BYTES))),
        )
        .route("/v1/rooms/{room_id}/members", get(rooms::members))
        .route("/v1/rooms/{room_id}/events", get(rooms::events))
        .route("/v1/rooms/{room_id}/admins", post(moderation::admins))
        .route("/v1/rooms/{room_id}/mutes", post(moderation::mutes))
        .route("/v1/rooms/{room_id}/kicks", post(moderation::kicks))
        .route("/v1/rooms/{room_id}/unban", post(moderation::unban))
        .route("/v1/rooms/{room_id}/mute_all", post(moderation::mute_all))
        .route("/v1/rooms/{room_id}/info", post(moderation::info))
        .route("/v1/rooms/{room_id}/attributes", post(moderation::attributes))
        .route("/v1/rooms/{room_id}/moderation", get(moderation::list))
        .route("/v1/rooms/{room_id}/seats", get(seats::list))
        .route("/v1/rooms/{room_id}/seats/{action}", post(seats::seat))
        // Before the handlers forward: a request is verified where it arrives, and by the owner.
        .route_layer(axum::middleware::from_fn_with_state(state.clone(), caller::authenticate));
    // The owner's end of the cluster hop (`api::forward::HOP_PATH`), with a cluster only: it
    // verifies the sending node's seal, then the caller's credential itself, per operation.
    let v1 = match &state.forwarder {
        Some(_) => v1.route("/internal/v1/operations", post(hop::serve)),
        None => v1,
    }
    .route_layer(edge::layer(options.request_timeout, options.max_in_flight));
    let health = Router::new().route("/healthz", get(healthz)).route("/readyz", get(readyz));
    outer_layers(with_fallbacks(v1.merge(health)), options.body_limit).with_state(state)
}

/// The admin listener's router: the outbox admin routes and `/metrics`; with a `token`, every
/// request (unknown routes included) needs `Authorization: Bearer <token>`.
pub fn admin_router(state: AppState, token: Option<Secret>) -> Router {
    let router = Router::new()
        .route("/admin/outbox/stats", get(admin::stats))
        .route("/admin/outbox", get(admin::list))
        .route("/admin/outbox/requeue", post(admin::requeue))
        .route("/admin/outbox/{event_id}", get(admin::show))
        .route("/admin/rooms/{room_id}/owner", get(admin::owner))
        .route("/metrics", get(render_metrics));
    let router = with_fallbacks(router);
    let router = match token {
        // Inside the request id and the trace span: a refused request is logged with its id.
        Some(token) => {
            router.layer(axum::middleware::from_fn_with_state(auth::BearerToken::new(token), auth::require))
        }
        None => router,
    };
    outer_layers(router, ADMIN_BODY_LIMIT).with_state(state)
}

/// Largest admin request body: a requeue naming the most event ids fits.
const ADMIN_BODY_LIMIT: usize = 1 << 20;

/// Request metrics by matched route, and JSON answers for unknown routes and methods.
fn with_fallbacks<S: Clone + Send + Sync + 'static>(router: Router<S>) -> Router<S> {
    router
        .route_layer(axum::middleware::from_fn(metrics::track))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
}

/// What both routers wrap everything in: the body limit, panics caught into a 500 JSON
/// answer, request ids (an invalid one replaced by a fresh one), and one span per request.
fn outer_layers<S: Clone + Send + Sync + 'static>(router: Router<S>, body_limit: usize) -> Router<S> {
    router
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(CatchPanicLayer::custom(edge::panic_response))
        .layer(PropagateRequestIdLayer::x_request_id())
        .layer(tower::util::MapResponseLayer::new(crate::api::edge::answer_trace))
        .layer(TraceLayer::new_for_http().make_span_with(request_span))
        .layer(SetRequestIdLayer::x_request_id(MakeRequestUuid))
        .layer(tower::util::MapRequestLayer::new(crate::api::edge::drop_invalid_request_id))
}

/// One span per request, carrying its `x-request-id` (set just outside by the request-id
/// layer), so every log line of the request can be found by it, and continuing the caller's
/// trace (`traceparent`).
fn request_span(request: &axum::http::Request<axum::body::Body>) -> tracing::Span {
    let request_id = request.headers().get("x-request-id").and_then(|v| v.to_str().ok()).unwrap_or_default();
    let span = tracing::info_span!(
        "http",
        method = %request.method(),
        path = %request.uri().path(),
        request_id,
        trace_id = tracing::field::Empty,
        span_id = tracing::field::Empty,
    );
    crate::api::edge::continue_trace(span, request.headers())
}

async fn healthz() -> &'static str {
    "ok"
}

async fn readyz(State(state): State<AppState>) -> Result<&'static str, ApiError> {
    if !state.lifecycle.is_ready() {
        return Err(ApiError::draining());
    }
    state.db_ping.check().await?;
    Ok("ready")
}

async fn render_metrics(State(state): State<AppState>) -> Response {
    match &state.metrics {
        Some(handle) => handle.render().into_response(),
        None => (StatusCode::NOT_FOUND, "metrics recorder not installed").into_response(),
    }
}

async fn not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such route")
}

async fn method_not_allowed(method: axum::http::Method) -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        format!("{method} is not allowed on this route"),
    )
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::http::Request;
    use tower::ServiceExt;

    use super::*;

    async fn call(router: &Router, path: &str) -> (StatusCode, serde_json::Value) {
        let response = router.clone().oneshot(Request::get(path).body(Body::empty()).unwrap()).await.unwrap();
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), 4096).await.unwrap();
        (status, serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null))
    }

    async fn boom() -> &'static str {
        panic!("bug in a handler")
    }

    #[tokio::test]
    async fn a_panicking_handler_answers_500_json_and_the_router_keeps_serving() {
        let routes = Router::new()
            .route("/boom", get(boom))
            .route("/fine", get(|| async { axum::Json(serde_json::json!({"ok": true})) }));
        let router: Router = outer_layers(with_fallbacks(routes), 1024);
        let (status, body) = call(&router, "/boom").await;
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(body["error"]["code"], "internal");
        assert!(!body.to_string().contains("bug in a handler"), "the panic text is logged, not answered");
        let (status, body) = call(&router, "/fine").await;
        assert_eq!((status, body["ok"].as_bool()), (StatusCode::OK, Some(true)));
    }
}
