//! The hop's wire format: one internal route of the owner's public listener ([`HOP_PATH`]),
//! `POST`ed the neutral request as one JSON body ([`Hop`]: the room, the [`Operation`], the edge
//! it came in by, the time the caller still waits), with what every request carries as
//! headers (the caller's `Authorization` as the very bytes it sent, `x-request-id`,
//! `traceparent`, and [`FORWARDED_BY`]). The owner answers 200 with the [`Outcome`](crate::api::Outcome) as JSON, or
//! its refusal as any route answers one: the status and `{"error": {"code", "message"}}`, with
//! `WWW-Authenticate` and `Retry-After`.
//!
//! HTTP underneath because the directory knows each owner by its public HTTP origin, and
//! because the owner's HTTP stack already gives a hop everything it needs (request id, trace
//! context, load shedding, the request timeout, the body limit).

use std::borrow::Cow;
use std::time::Duration;

use ::http::{HeaderMap, HeaderValue, StatusCode, header};
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use super::Answered;
use crate::api::error::{self, ApiError};
use crate::api::operation::{BATCH_HEARTBEAT_BYTES, Credential, Operation, RoomRequest, Sender};
use crate::auth::Caller;
use crate::domain::RoomId;
use crate::room::Transport;

/// The owner's route of the hop.
pub const HOP_PATH: &str = "/internal/v1/operations";

/// Header of a hop: the forwarding node's id. A request carrying it is never forwarded again,
/// whichever route it reached (the loop guard; never a credential).
pub const FORWARDED_BY: &str = "x-room-forwarded-by";

/// Room for the envelope around the largest request an edge takes.
const ENVELOPE_BYTES: usize = 4 * 1024;

/// The largest owner's answer read back (a members page of 1,000 is about 100 KB).
const ANSWER_LIMIT: usize = 4 << 20;

/// The largest hop body, for a node whose `http.body_limit_bytes` is `body_limit`: the
/// largest request of either edge (the batch heartbeat's, at least), and its envelope. The
/// forwarder refuses a larger one (413 `too_large`), and the owner's route takes up to it.
pub fn hop_limit(body_limit: usize) -> usize {
    body_limit.max(BATCH_HEARTBEAT_BYTES) + ENVELOPE_BYTES
}

/// The body of a hop.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hop {
    /// The room.
    pub room_id: RoomId,
    /// What is asked of it.
    pub operation: Operation,
    /// The edge the request came in by (`http`, `grpc`).
    pub transport: Edge,
    /// How long the caller still waited, in milliseconds, when the hop was sent; absent when
    /// the caller set no deadline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_ms: Option<u64>,
}

impl Hop {
    /// The request at the owner, from `caller` (verified there from `credential`), traced as
    /// `request_id`: never forwarded again, and bounded by the caller's deadline.
    pub fn into_request(
        self,
        caller: Caller,
        credential: Option<Credential>,
        request_id: String,
    ) -> RoomRequest {
        let sender = Sender {
            deadline: self.budget_ms.and_then(|ms| Instant::now().checked_add(Duration::from_millis(ms))),
            hop: true,
            ..Sender::new(caller, credential, request_id, self.transport.into())
        };
        RoomRequest::new(self.room_id, self.operation, sender)
    }
}

/// The hop's body for `request`; 413 `too_large` over `limit`.
pub fn encode(request: &RoomRequest, limit: usize) -> Result<Bytes, ApiError> {
    let budget = request.sender.deadline.map(|d| d.saturating_duration_since(Instant::now()));
    let hop = Hop {
        room_id: request.room_id.clone(),
        operation: request.operation.clone(),
        transport: request.sender.transport.into(),
        budget_ms: budget.map(|b| u64::try_from(b.as_millis()).unwrap_or(u64::MAX)),
    };
    // Cannot fail: serde_json fails only on a map with non-string keys or a `Serialize` impl
    // that errors, and a hop is derived impls over ids, strings, integers and unit variants.
    let body = serde_json::to_vec(&hop).expect("a hop always serialises");
    if body.len() > limit {
        return Err(ApiError::too_large());
    }
    Ok(Bytes::from(body))
}

/// The hop in `body`, at the owner: exactly the form [`encode`] writes, else 400. A field no
/// node sends (unknown, or misplaced) is refused as the edges refuse one, never ignored; the
/// operation's bounds and who may ask for it are checked after, as for an edge's request.
pub fn decode_hop(body: &[u8]) -> Result<Hop, ApiError> {
    let value: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| ApiError::invalid("body", format!("not JSON: {e}")))?;
    let hop: Hop = serde_json::from_value(value.clone())
        .map_err(|e| ApiError::invalid("operation", format!("not an operation: {e}")))?;
    // Cannot fail (see `encode`); a hop that does not come back as it was sent is refused.
    let canonical = serde_json::to_value(&hop).unwrap_or(serde_json::Value::Null);
    if canonical != value {
        return Err(ApiError::invalid(
            "operation",
            "holds a field no node sends (unknown, or out of place): only a node's own encoding is served",
        ));
    }
    Ok(hop)
}

/// The hop's headers for `request` from node `node_id`; within the `forward` span, whose trace
/// context they carry.
pub fn headers(request: &RoomRequest, node_id: &str) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    if let Some(credential) = &request.sender.credential {
        headers.insert(header::AUTHORIZATION, credential.header());
    }
    // Always a valid request id (the edges replaced any other).
    if let Ok(request_id) = HeaderValue::from_str(&request.sender.request_id) {
        headers.insert(crate::api::edge::REQUEST_ID, request_id);
    }
    if let Ok(node_id) = HeaderValue::from_str(node_id) {
        headers.insert(FORWARDED_BY, node_id);
    }
    crate::telemetry::traces::inject_current(&mut headers);
    headers
}

/// The owner's answer: its outcome, or its refusal as it answered it (status, code, message,
/// challenge, `Retry-After`). An answer that is neither, or that says the owner does not serve
/// the hop (a node of an older version), is `owner_unavailable`.
pub fn decode(status: StatusCode, headers: &HeaderMap, body: &[u8]) -> Answered {
    if body.len() > ANSWER_LIMIT {
        return Err(unreadable("its answer is too large"));
    }
    if status == StatusCode::OK {
        return serde_json::from_slice(body).map_err(|_| unreadable("its answer is not an outcome"));
    }
    let Ok(ErrorBody { error }) = serde_json::from_slice::<ErrorBody>(body) else {
        return Err(unreadable(&format!("it answered {status} without an error body")));
    };
    if matches!(error.code.as_str(), "not_found" | "method_not_allowed") {
        return Err(unreadable("it does not serve the cluster hop (an older version?)"));
    }
    let header = |name| headers.get(name).and_then(|v: &HeaderValue| v.to_str().ok());
    let challenge = header(header::WWW_AUTHENTICATE).map(|c| match c {
        error::INVALID_TOKEN_CHALLENGE => error::INVALID_TOKEN_CHALLENGE,
        _ => error::CHALLENGE,
    });
    Err(ApiError {
        status,
        code: Cow::Owned(error.code),
        message: error.message,
        challenge,
        retry_after: header(header::RETRY_AFTER).and_then(|v| v.parse().ok()),
        until_ms: error.until_ms,
    })
}

/// `owner_unavailable`, logging why.
fn unreadable(why: &str) -> ApiError {
    tracing::warn!(why, "The room's owner answered the hop with what this node cannot read");
    ApiError::owner_unavailable()
}

/// `{"error": {"code", "message"}}`, the error body of every route.
#[derive(Deserialize)]
struct ErrorBody {
    error: ErrorFields,
}

#[derive(Deserialize)]
struct ErrorFields {
    code: String,
    message: String,
    #[serde(default)]
    until_ms: Option<i64>,
}

/// The edge a hop's request came in by, as the hop names it: its [`Transport`] label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Edge {
    /// The HTTP API.
    Http,
    /// The gRPC API.
    Grpc,
    /// The service itself.
    Internal,
}

impl From<Transport> for Edge {
    fn from(transport: Transport) -> Self {
        match transport {
            Transport::Http => Edge::Http,
            Transport::Grpc => Edge::Grpc,
            Transport::Internal => Edge::Internal,
        }
    }
}

impl From<Edge> for Transport {
    fn from(edge: Edge) -> Self {
        match edge {
            Edge::Http => Transport::Http,
            Edge::Grpc => Transport::Grpc,
            Edge::Internal => Transport::Internal,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::Outcome;
    use crate::domain::{Command, CommandId, UserId};

    fn request(deadline: Option<Instant>) -> RoomRequest {
        let operation = Operation::Command {
            command_id: CommandId::parse("c-1").unwrap(),
            command: Command::JoinRoom { user_id: UserId::parse("u").unwrap() },
        };
        let credential = Credential::from_bytes(b"Bearer t0ken");
        let sender = Sender {
            deadline,
            ..Sender::new(Caller::Anonymous, credential, "req-1".into(), Transport::Grpc)
        };
        RoomRequest::new(RoomId::parse("r-1").unwrap(), operation, sender)
    }

    #[tokio::test(start_paused = true)]
    async fn a_hop_carries_the_operation_its_edge_and_the_callers_deadline() {
        let sent = request(Some(Instant::now() + Duration::from_millis(1500)));
        let body = encode(&sent, 1024).unwrap();
        let hop: Hop = serde_json::from_slice(&body).unwrap();
        assert_eq!((hop.transport, hop.budget_ms), (Edge::Grpc, Some(1500)));
        let credential = Credential::from_bytes(b"Bearer t0ken");
        let at_owner = hop.into_request(Caller::Anonymous, credential, "req-1".into());
        assert_eq!((&at_owner.room_id, &at_owner.operation), (&sent.room_id, &sent.operation));
        assert!(at_owner.sender.hop, "a hop is never forwarded again");
        assert_eq!(at_owner.sender.transport, Transport::Grpc);
        for transport in Transport::ALL {
            let name = serde_json::to_value(Edge::from(transport)).unwrap();
            assert_eq!(name, transport.as_str(), "the hop names an edge by its label");
        }
        assert_eq!(at_owner.sender.deadline, Some(Instant::now() + Duration::from_millis(1500)));
        let without = serde_json::from_slice::<Hop>(&encode(&request(None), 1024).unwrap()).unwrap();
        assert_eq!(without.budget_ms, None);
        assert_eq!(encode(&sent, body.len() - 1).unwrap_err().code, "too_large");
    }

    #[tokio::test(start_paused = true)]
    async fn the_owner_reads_back_only_what_a_node_writes() {
        let body = encode(&request(Some(Instant::now() + Duration::from_millis(800))), 4096).unwrap();
        let hop = decode_hop(&body).unwrap();
        assert_eq!(hop.budget_ms, Some(800));
        let mut value: serde_json::Value = serde_json::from_slice(&body).unwrap();
        for extra in [
            ("/extra", serde_json::json!(1)),
            ("/operation/extra", serde_json::json!(1)),
            ("/operation/command/extra", serde_json::json!(1)),
        ] {
            let mut changed = value.clone();
            let (parent, key) = extra.0.rsplit_once('/').unwrap();
            changed.pointer_mut(parent).unwrap()[key] = extra.1;
            let refused = decode_hop(&serde_json::to_vec(&changed).unwrap()).unwrap_err();
            assert_eq!(
                (refused.status, refused.code.as_ref()),
                (StatusCode::BAD_REQUEST, "invalid_argument"),
                "{changed}"
            );
        }
        value["operation"]["op"] = "explode".into();
        assert_eq!(
            decode_hop(&serde_json::to_vec(&value).unwrap()).unwrap_err().status,
            StatusCode::BAD_REQUEST
        );
        assert_eq!(decode_hop(b"[1").unwrap_err().status, StatusCode::BAD_REQUEST);
    }

    #[test]
    fn the_headers_carry_the_credential_the_request_id_and_the_loop_guard() {
        let headers = headers(&request(None), "n-1");
        assert_eq!(headers[header::AUTHORIZATION], "Bearer t0ken");
        assert!(headers[header::AUTHORIZATION].is_sensitive());
        assert_eq!(headers["x-request-id"], "req-1");
        assert_eq!(headers[FORWARDED_BY], "n-1");
    }

    #[test]
    fn an_owners_refusal_comes_back_as_it_answered_it() {
        let mut headers = HeaderMap::new();
        headers.insert(header::RETRY_AFTER, HeaderValue::from_static("3"));
        let body = br#"{"error":{"code":"rate_limited","message":"slow down"}}"#;
        let refused = decode(StatusCode::TOO_MANY_REQUESTS, &headers, body).unwrap_err();
        assert_eq!((refused.status, refused.code.as_ref()), (StatusCode::TOO_MANY_REQUESTS, "rate_limited"));
        assert_eq!((refused.message.as_str(), refused.retry_after), ("slow down", Some(3)));
        let mut headers = HeaderMap::new();
        headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static(error::INVALID_TOKEN_CHALLENGE));
        let body = br#"{"error":{"code":"unauthenticated","message":"expired"}}"#;
        let refused = decode(StatusCode::UNAUTHORIZED, &headers, body).unwrap_err();
        assert_eq!(refused.challenge, Some(error::INVALID_TOKEN_CHALLENGE));
    }

    #[test]
    fn what_no_owner_of_this_version_answers_is_owner_unavailable() {
        let none = HeaderMap::new();
        let older = br#"{"error":{"code":"not_found","message":"no such route"}}"#;
        for (status, body) in [
            (StatusCode::NOT_FOUND, &older[..]),
            (StatusCode::BAD_GATEWAY, b"<html>proxy</html>"),
            (StatusCode::OK, br#"{"outcome":"nothing"}"#),
        ] {
            assert_eq!(decode(status, &none, body).unwrap_err().code, "owner_unavailable", "{status}");
        }
        let outcome = serde_json::to_vec(&Outcome::Heartbeat).unwrap();
        assert_eq!(decode(StatusCode::OK, &none, &outcome), Ok(Outcome::Heartbeat));
    }
}
