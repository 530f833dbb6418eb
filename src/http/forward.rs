//! Routing in a cluster (SPEC §11.4), over HTTP: the middleware of the `/v1/rooms` routes
//! hands a request for a room this node does not own to [`crate::api::forward`] (the owner
//! located, one hop, a stale entry looked up again), and passes the owner's answer, or the
//! error this node answers in its stead, on as it is.

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::api::forward::{Answer, FORWARDED_BY, forward};
use crate::api::{ApiError, AppState};

/// The middleware of the `/v1/rooms` routes.
pub async fn route(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let Some(forwarder) = state.forwarder.as_ref() else {
        return next.run(request).await;
    };
    let (parts, body) = request.into_parts();
    // A create names its room in the body: buffer it (bounded) to route on it.
    let (room_id, body) = if parts.uri.path() == "/v1/rooms" {
        let Ok(bytes) = axum::body::to_bytes(body, forwarder.body_limit()).await else {
            return too_large();
        };
        (room_in_body(&bytes), Body::from(bytes))
    } else {
        (room_in_path(parts.uri.path()), body)
    };
    let Some(room_id) = room_id.filter(|room| !forwarder.cluster().owns(room)) else {
        // Served here (or no room named: the handler answers the 400).
        return next.run(Request::from_parts(parts, body)).await;
    };
    if parts.headers.contains_key(FORWARDED_BY) {
        // Misrouted hop (the sender's directory was stale): never a second hop.
        return ApiError::not_owner().into_response();
    }
    let Ok(body) = axum::body::to_bytes(body, forwarder.body_limit()).await else {
        return too_large();
    };
    forward(forwarder, &room_id, &Request::from_parts(parts, ()), body).await.into_response()
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
