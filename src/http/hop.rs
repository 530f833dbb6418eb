//! The owner's end of the cluster hop (`POST /internal/v1/operations`, [`HOP_PATH`]), mounted
//! only with `cluster.enabled`: a node that does not own a room sends it the neutral request
//! ([`Hop`]: the operation itself, with the caller's very `Authorization`), sealed with the
//! cluster's secret ([`Seal`]), and this route runs it through the same
//! [`serve`](crate::api::serve) both edges use ([`serve_hop`]), answering the [`Outcome`] as
//! JSON, or the refusal as any route does.
//!
//! A request without a seal is refused 401 before its body is read; one whose seal does not
//! verify (another secret, a changed body, older than a minute) 401 before the body is parsed.
//! A verified hop must be exactly what a node sends ([`wire::decode_hop`]: no unknown field),
//! and the owner checks its operation as it checks an edge's (bounds, who may ask for it).
//!
//! It sits behind the public edge (load shedding, the request timeout) and outside the
//! caller middleware: the caller is verified here from the credential the hop carries, per
//! operation (a read needs none while reads are public).
//!
//! [`HOP_PATH`]: crate::api::forward::HOP_PATH

use std::time::SystemTime;

use axum::extract::{Request, State};
use axum::http::header::AUTHORIZATION;
use axum::http::{HeaderMap, StatusCode};

use super::extract::RequestId;
use crate::api::forward::seal::{Refused, Seal};
use crate::api::forward::wire::{self, Hop};
use crate::api::{ApiError, AppState, Credential, Outcome, serve_hop};

/// Serves a hop.
pub async fn serve(
    State(state): State<AppState>,
    RequestId(request_id): RequestId,
    request: Request,
) -> Result<axum::Json<Outcome>, ApiError> {
    // Mounted only with a cluster; without one nothing here is anybody's.
    let Some(forwarder) = &state.forwarder else {
        return Err(ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such route"));
    };
    let (parts, body) = request.into_parts();
    Seal::time_of(&parts.headers).map_err(refused)?;
    let body = axum::body::to_bytes(body, forwarder.body_limit()).await.map_err(|_| ApiError::too_large())?;
    forwarder.seal().verify(&parts.headers, &body, SystemTime::now()).map_err(refused)?;
    let hop: Hop = wire::decode_hop(&body)?;
    let credential = credential(&parts.headers);
    Ok(axum::Json(serve_hop(&state, hop, credential, request_id).await?))
}

fn credential(headers: &HeaderMap) -> Option<Credential> {
    headers.get(AUTHORIZATION).and_then(|v| Credential::from_bytes(v.as_bytes()))
}

/// A hop that is not a node's: 401, the reason logged (the caller learns only that much).
fn refused(why: Refused) -> ApiError {
    tracing::warn!(%why, "Refused a cluster hop that no node of this cluster sealed");
    metrics::counter!(crate::telemetry::names::HOPS_REFUSED_TOTAL).increment(1);
    ApiError::new(
        StatusCode::UNAUTHORIZED,
        "unauthenticated",
        "the cluster hop is for the nodes of this cluster only",
    )
}
