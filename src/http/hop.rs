//! The owner's end of the cluster hop (`POST /internal/v1/operations`, [`HOP_PATH`]): a node
//! that does not own a room sends it the neutral request ([`Hop`]: the operation itself, with
//! the caller's very `Authorization`), and this route runs it through the same
//! [`serve`](crate::api::serve) both edges use ([`serve_hop`]), answering the [`Outcome`] as
//! JSON, or the refusal as any route does.
//!
//! It sits behind the public edge (load shedding, the request timeout) and outside the
//! caller middleware: the caller is verified here from the credential the hop carries, per
//! operation (a read needs none while reads are public).
//!
//! [`HOP_PATH`]: crate::api::forward::HOP_PATH

use axum::extract::State;
use axum::http::HeaderMap;
use axum::http::header::AUTHORIZATION;

use super::extract::{Json, RequestId};
use crate::api::forward::wire::Hop;
use crate::api::{ApiError, AppState, Credential, Outcome, serve_hop};

/// Serves a hop.
pub async fn serve(
    State(state): State<AppState>,
    headers: HeaderMap,
    RequestId(request_id): RequestId,
    Json(hop): Json<Hop>,
) -> Result<axum::Json<Outcome>, ApiError> {
    let credential = headers.get(AUTHORIZATION).and_then(|v| Credential::from_bytes(v.as_bytes()));
    Ok(axum::Json(serve_hop(&state, hop, credential, request_id).await?))
}
