//! The gRPC API (tonic) on its own listener (`grpc.listen`), beside the HTTP API:
//!
//! - `room.v1.RoomService` ([`rooms`]): the commands and queries of `/v1/rooms...`, read into
//!   the same neutral [`RoomRequest`](crate::api::RoomRequest) the HTTP handlers build and
//!   served by the same [`crate::api::serve`] (here, or at the room's owner in a cluster), so
//!   both APIs share one command path; failures, the API's
//!   [`ApiError`](crate::api::ApiError), map to standard status codes ([`status`]);
//! - `grpc.health.v1.Health` ([`health`]): follows readiness (`/readyz`);
//! - server reflection, listing both services, in both versions clients speak: `v1` and
//!   `v1alpha` (Python's `grpcio-reflection`, older grpcurl and several GUI clients speak only
//!   the latter), both answered from the same descriptor sets.
//!
//! Every call goes through the layers of [`router`]: a request id (`x-request-id`, generated
//! when absent or not 1–128 printable ASCII characters, as on HTTP: [`crate::api::edge`];
//! echoed back), one tracing span, panics caught into `INTERNAL`, and a deadline (the
//! client's `grpc-timeout`, at most `http.request_timeout`) answered with `DEADLINE_EXCEEDED`
//! ([`deadline`]; a call forwarded to its room's owner carries it there). The room service's
//! calls then pass its edge ([`edge`]): load shedding beyond `http.max_in_flight`
//! (`RESOURCE_EXHAUSTED`), and authentication from metadata before the message is read
//! (`UNAUTHENTICATED`); its messages are limited per method (`Heartbeats`: the batch's size;
//! the others: `http.body_limit_bytes`). The protobuf code is generated at build time from
//! `proto/` (see `build.rs`).
//!
//! This module and the HTTP API (`src/http`) do not import each other: what both serve from
//! (the state, the neutral request and its serving, the error, readiness's ping, the hop to a
//! room's owner, the request id rules) is [`crate::api`]'s. The application ([`crate::app`])
//! hands the router to the HTTP API's accept loop (`http::server::serve`), which serves it over
//! HTTP/2 (`ServeOptions::grpc`).

pub mod deadline;
pub mod edge;
pub mod health;
pub mod rooms;
pub mod status;

use std::time::Duration;

use tower_http::catch_panic::CatchPanicLayer;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::TraceLayer;

use crate::api::{AppState, BATCH_HEARTBEAT_BYTES};

/// The code generated from `proto/room/v1/room.proto`.
pub mod pb {
    #![allow(missing_docs, clippy::all, clippy::pedantic)]
    tonic::include_proto!("room.v1");
}

/// The encoded descriptor set of `proto/` (server reflection serves it).
pub const FILE_DESCRIPTOR_SET: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/room_descriptor.bin"));

/// The fully qualified name of the room service.
pub const SERVICE_NAME: &str = "room.v1.RoomService";

/// The limits of the gRPC router (from `http.*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GrpcOptions {
    /// Largest request message of every method but `Heartbeats`, in bytes (tonic answers
    /// `OUT_OF_RANGE` above it): `http.body_limit_bytes`, as over HTTP.
    pub max_message_bytes: usize,
    /// Largest `Heartbeats` message: [`BATCH_HEARTBEAT_BYTES`],
    /// or `http.body_limit_bytes` when larger, as the HTTP batch route.
    pub max_batch_message_bytes: usize,
    /// Longest a call may run, whatever deadline the client sets.
    pub request_timeout: Duration,
    /// Most room-service calls in flight at once; beyond it, `RESOURCE_EXHAUSTED` at once.
    pub max_in_flight: usize,
}

impl From<&crate::config::HttpSettings> for GrpcOptions {
    fn from(http: &crate::config::HttpSettings) -> Self {
        Self {
            max_message_bytes: http.body_limit_bytes,
            max_batch_message_bytes: http.body_limit_bytes.max(BATCH_HEARTBEAT_BYTES),
            request_timeout: http.request_timeout,
            max_in_flight: http.max_in_flight,
        }
    }
}

impl Default for GrpcOptions {
    /// The defaults of `http.*`.
    fn default() -> Self {
        Self {
            max_message_bytes: 65_536,
            max_batch_message_bytes: BATCH_HEARTBEAT_BYTES,
            request_timeout: Duration::from_secs(10),
            max_in_flight: 512,
        }
    }
}

/// The gRPC services behind their layers: a request id set (or kept) outermost so the span
/// carries it, the span, the id echoed on the answer, then the deadline around the call. The
/// room service's methods sit behind its edge ([`edge`]): load shedding, then authentication
/// from metadata, each method with its own message limit.
pub fn router(state: AppState, options: GrpcOptions) -> anyhow::Result<axum::Router> {
    let reflection_v1 = reflection().build_v1()?;
    let reflection_v1alpha = reflection().build_v1alpha()?;
    let rooms = |max_message_bytes| {
        pb::room_service_server::RoomServiceServer::new(rooms::GrpcRooms::new(state.clone()))
            .max_decoding_message_size(max_message_bytes)
    };
    // The batch heartbeat takes the largest message; every other method HTTP's body limit.
    let room_routes = axum::Router::new()
        .route_service(&format!("/{SERVICE_NAME}/Heartbeats"), rooms(options.max_batch_message_bytes))
        .route_service(&format!("/{SERVICE_NAME}/{{*method}}"), rooms(options.max_message_bytes))
        .route_layer(axum::middleware::from_fn_with_state(state.auth.clone(), edge::authenticate))
        .route_layer(edge::layer(options.max_in_flight));
    let health = tonic_health::pb::health_server::HealthServer::new(health::Readiness::new(state));
    let routes =
        tonic::service::Routes::new(health).add_service(reflection_v1).add_service(reflection_v1alpha);
    Ok(routes
        .prepare()
        .into_axum_router()
        .merge(room_routes)
        .layer(deadline::DeadlineLayer::new(options.request_timeout))
        .layer(CatchPanicLayer::custom(panic_status))
        .layer(PropagateRequestIdLayer::x_request_id())
        .layer(tower::util::MapResponseLayer::new(crate::api::edge::answer_trace))
        .layer(TraceLayer::new_for_grpc().make_span_with(call_span))
        .layer(SetRequestIdLayer::x_request_id(MakeRequestUuid))
        .layer(tower::util::MapRequestLayer::new(crate::api::edge::drop_invalid_request_id)))
}

/// Server reflection over the descriptor sets of the room and health services (each version
/// of the reflection service is built from its own builder).
fn reflection() -> tonic_reflection::server::Builder<'static> {
    tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
}

/// A panicking handler answers `INTERNAL` (logged and counted like an HTTP handler's panic);
/// the process keeps serving.
fn panic_status(panic: Box<dyn std::any::Any + Send + 'static>) -> axum::http::Response<axum::body::Body> {
    crate::api::edge::report_panic("gRPC", "INTERNAL", panic.as_ref());
    tonic::Status::internal("internal error").into_http()
}

/// One span per call, carrying the method path and its `x-request-id`, and continuing the
/// caller's trace (`traceparent` metadata).
fn call_span<B>(request: &axum::http::Request<B>) -> tracing::Span {
    let request_id = request.headers().get("x-request-id").and_then(|v| v.to_str().ok()).unwrap_or_default();
    let span = tracing::info_span!(
        "grpc",
        method = %request.uri().path(),
        request_id,
        trace_id = tracing::field::Empty,
        span_id = tracing::field::Empty,
    );
    crate::api::edge::continue_trace(span, request.headers())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_answers_internal_without_its_text() {
        let answer = panic_status(Box::new("bug in a handler"));
        assert_eq!(answer.headers()["grpc-status"], "13");
        let message = answer.headers().get("grpc-message").map(|v| v.to_str().unwrap_or_default().to_owned());
        assert!(!message.unwrap_or_default().contains("bug"), "the panic text is logged, not answered");
    }
}
