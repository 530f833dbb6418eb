//! The HTTP API (axum): room commands, room snapshots, health, readiness, metrics and the
//! outbox admin routes. [`router`] is a pure builder, tested with `oneshot`.

pub mod admin;
pub mod error;
pub mod extract;
pub mod metrics;
pub mod rooms;
pub mod server;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::TraceLayer;

use crate::room::RoomService;
use crate::store::SharedRepository;
pub use error::ApiError;

/// Serving or draining; shared by the HTTP handlers and the app lifecycle.
#[derive(Debug, Clone, Default)]
pub struct Lifecycle {
    draining: Arc<AtomicBool>,
}

impl Lifecycle {
    /// Marks the service draining: `/readyz` and new commands answer 503.
    pub fn start_draining(&self) {
        self.draining.store(true, Ordering::SeqCst);
    }

    /// True once shutdown began.
    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }
}

/// Everything the handlers need.
#[derive(Clone)]
pub struct AppState {
    /// The room service.
    pub rooms: RoomService,
    /// The repository (readiness, admin reads).
    pub repo: SharedRepository,
    /// Serving or draining.
    pub lifecycle: Lifecycle,
    /// Renders `/metrics`; `None` when no recorder is installed.
    pub metrics: Option<metrics_exporter_prometheus::PrometheusHandle>,
}

/// Builds the router; `body_limit` bounds every request body (413 above it).
pub fn router(state: AppState, body_limit: usize) -> Router {
    Router::new()
        .route("/v1/rooms", post(rooms::create))
        .route("/v1/rooms/{room_id}", get(rooms::get))
        .route("/v1/rooms/{room_id}/join", post(rooms::join))
        .route("/v1/rooms/{room_id}/leave", post(rooms::leave))
        .route("/v1/rooms/{room_id}/gifts", post(rooms::gift))
        .route("/v1/rooms/{room_id}/close", post(rooms::close))
        .route("/v1/rooms/{room_id}/heartbeat", post(rooms::heartbeat))
        .route("/v1/rooms/{room_id}/members", get(rooms::members))
        .route("/admin/outbox/stats", get(admin::stats))
        .route("/admin/outbox", get(admin::list))
        .route("/admin/outbox/requeue", post(admin::requeue))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(render_metrics))
        .route_layer(axum::middleware::from_fn(metrics::track))
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(PropagateRequestIdLayer::x_request_id())
        .layer(TraceLayer::new_for_http().make_span_with(request_span))
        .layer(SetRequestIdLayer::x_request_id(MakeRequestUuid))
        .with_state(state)
}

/// One span per request, carrying its `x-request-id` (set just outside by the request-id
/// layer), so every log line of the request can be found by it.
fn request_span(request: &axum::http::Request<axum::body::Body>) -> tracing::Span {
    let request_id = request.headers().get("x-request-id").and_then(|v| v.to_str().ok()).unwrap_or_default();
    tracing::info_span!("http", method = %request.method(), path = %request.uri().path(), request_id)
}

async fn healthz() -> &'static str {
    "ok"
}

async fn readyz(State(state): State<AppState>) -> Result<&'static str, ApiError> {
    if state.lifecycle.is_draining() {
        return Err(ApiError::draining());
    }
    state.repo.ping().await.map_err(crate::room::RoomError::from)?;
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
