//! Routing in a cluster (SPEC §11.4): a request for a room this node does not own is forwarded
//! once to the owner, and the owner's answer passed through. The hop carries
//! [`FORWARDED_BY`], and a forwarded request is never forwarded again (a misrouted one answers
//! 503 `not_owner`, and the client's retry is routed afresh). The owner is found through the
//! Redis directory, or the lease table when Redis misses or its entry proved stale.

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::AppState;
use super::error::ApiError;
use crate::cluster::{Cluster, Located, Owner};
use crate::telemetry::names;

/// Header of a forwarded request: the forwarding node's id (the loop guard).
pub const FORWARDED_BY: &str = "x-room-forwarded-by";

/// Headers a hop carries over, each way: the caller's credential too, which the owner
/// verifies again (SPEC §12.3).
const REQUEST_HEADERS: [header::HeaderName; 3] =
    [header::CONTENT_TYPE, header::ACCEPT, header::AUTHORIZATION];
const REQUEST_ID: &str = "x-request-id";

/// Longest wait for a shard between owners (a handoff, or a dead owner's lease expiring is
/// not waited for: that answers 503 `not_owner` at once after this).
const SETTLE_PATIENCE: Duration = Duration::from_secs(3);

/// The forwarding client and the limits of a hop.
#[derive(Debug, Clone)]
pub struct Forwarder {
    cluster: Cluster,
    client: reqwest::Client,
    body_limit: usize,
}

impl Forwarder {
    /// Forwards through `cluster` with hops bounded by `timeout`; bodies up to `body_limit`.
    pub fn new(cluster: Cluster, timeout: Duration, body_limit: usize) -> reqwest::Result<Self> {
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(Duration::from_secs(1))
            .pool_max_idle_per_host(64)
            .build()?;
        Ok(Self { cluster, client, body_limit })
    }

    /// The cluster routed through.
    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }
}

/// The middleware of the `/v1/rooms` routes.
pub async fn route(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let Some(forwarder) = state.forwarder.as_ref() else {
        return next.run(request).await;
    };
    let (parts, body) = request.into_parts();
    // A create names its room in the body: buffer it (bounded) to route on it.
    let (room_id, body) = if parts.uri.path() == "/v1/rooms" {
        let Ok(bytes) = axum::body::to_bytes(body, forwarder.body_limit).await else {
            return too_large();
        };
        (room_in_body(&bytes), Body::from(bytes))
    } else {
        (room_in_path(parts.uri.path()), body)
    };
    let Some(room_id) = room_id.filter(|room| !forwarder.cluster.owns(room)) else {
        // Served here (or no room named: the handler answers the 400).
        return next.run(Request::from_parts(parts, body)).await;
    };
    if parts.headers.contains_key(FORWARDED_BY) {
        // Misrouted hop (the sender's directory was stale): never a second hop.
        return ApiError::not_owner().into_response();
    }
    let Ok(body) = axum::body::to_bytes(body, forwarder.body_limit).await else {
        return too_large();
    };
    forward(forwarder, &room_id, &Request::from_parts(parts, ()), body).await
}

/// Forwards to the owner; a stale directory entry (the hop is refused, or the node is gone)
/// is looked up again in the lease table and tried once more. The gRPC calls for rooms owned
/// elsewhere come through here too (`grpc::forward`).
pub(crate) async fn forward(
    forwarder: &Forwarder,
    room_id: &str,
    request: &Request<()>,
    body: Bytes,
) -> Response {
    let cluster = &forwarder.cluster;
    let owner = match cluster.locate_settled(room_id, SETTLE_PATIENCE).await {
        Ok(Located::There(owner)) => owner,
        // The shard came here meanwhile, or has no owner yet: the client's retry is routed.
        Ok(Located::Here | Located::Nobody) => return count(ApiError::not_owner().into_response(), false),
        Err(error) => return count(ApiError::from(error).into_response(), false),
    };
    let first = match hop(forwarder, &owner, request, body.clone()).await {
        Ok(answer) if !is_not_owner(&answer) => return count(answer.into_response(), true),
        first => first,
    };
    tracing::info!(room_id, node = %owner.node_id, "The owner the directory named refused or did not answer");
    if let Ok(Located::There(fresh)) = cluster.locate(room_id, true).await
        && fresh != owner
    {
        return match hop(forwarder, &fresh, request, body).await {
            Ok(answer) => count(answer.into_response(), true),
            Err(_) => count(ApiError::owner_unavailable().into_response(), false),
        };
    }
    match first {
        Ok(answer) => count(answer.into_response(), false),
        Err(_) => count(ApiError::owner_unavailable().into_response(), false),
    }
}

/// The owner's answer, as received.
struct Answer {
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
}

impl IntoResponse for Answer {
    fn into_response(self) -> Response {
        let mut response = Response::new(Body::from(self.body));
        *response.status_mut() = self.status;
        for name in [header::CONTENT_TYPE, header::RETRY_AFTER, header::WWW_AUTHENTICATE] {
            if let Some(value) = self.headers.get(&name) {
                response.headers_mut().insert(name, value.clone());
            }
        }
        response
    }
}

fn is_not_owner(answer: &Answer) -> bool {
    answer.status == StatusCode::SERVICE_UNAVAILABLE
        && serde_json::from_slice::<serde_json::Value>(&answer.body)
            .is_ok_and(|v| v["error"]["code"] == "not_owner")
}

/// One hop to `owner`.
async fn hop(
    forwarder: &Forwarder,
    owner: &Owner,
    request: &Request<()>,
    body: Bytes,
) -> Result<Answer, reqwest::Error> {
    let path = request.uri().path_and_query().map_or("/", |p| p.as_str());
    let url = format!("{}{path}", owner.url);
    let mut hop = forwarder
        .client
        .request(request.method().clone(), url)
        .header(FORWARDED_BY, forwarder.cluster.node_id())
        .body(body);
    for name in REQUEST_HEADERS.iter().map(header::HeaderName::as_str).chain([REQUEST_ID]) {
        if let Some(value) = request.headers().get(name) {
            hop = hop.header(name, value.clone());
        }
    }
    let response = hop.send().await.map_err(|e| {
        let e = e.without_url();
        tracing::warn!(node = %owner.node_id, error = %e, "Forwarding failed");
        e
    })?;
    let status = response.status();
    let headers = response.headers().clone();
    let body = response.bytes().await?;
    Ok(Answer { status, headers, body })
}

fn count(response: Response, ok: bool) -> Response {
    let result = if ok { "ok" } else { "error" };
    metrics::counter!(names::COMMANDS_FORWARDED_TOTAL, names::LABEL_RESULT => result).increment(1);
    response
}

fn too_large() -> Response {
    ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "too_large", "request body is too large").into_response()
}

/// A create's `room_id` field.
fn room_in_body(body: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Create {
        room_id: Option<String>,
    }
    serde_json::from_slice::<Create>(body).ok()?.room_id
}

/// The `{room_id}` of `/v1/rooms/{room_id}/...`, percent-decoded as the handler sees it.
fn room_in_path(path: &str) -> Option<String> {
    let raw = path.strip_prefix("/v1/rooms/")?.split('/').next().filter(|s| !s.is_empty())?;
    percent_encoding::percent_decode_str(raw).decode_utf8().ok().map(|s| s.into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_room_is_read_from_the_path_or_a_create_body() {
        assert_eq!(room_in_path("/v1/rooms/r-1/join").as_deref(), Some("r-1"));
        assert_eq!(room_in_path("/v1/rooms/r%2D1").as_deref(), Some("r-1"));
        assert_eq!(room_in_path("/v1/rooms/"), None);
        assert_eq!(room_in_path("/healthz"), None);
        assert_eq!(room_in_body(br#"{"room_id":"r9","title":"t"}"#).as_deref(), Some("r9"));
        assert_eq!(room_in_body(b"[1]"), None);
        assert_eq!(room_in_body(br#"{"room_id":7}"#), None);
    }
}
