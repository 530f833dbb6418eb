//! A call for a room another node owns, in a cluster: forwarded once to the owner over its HTTP
//! API, through the very forwarding of the HTTP routes ([`crate::api::forward`]: the owner
//! found in the directory or the lease table, one hop, a stale entry looked up again). The
//! directory knows owners by their HTTP origin, and every RPC is the twin of an HTTP route
//! served by the same functions, so the call is sent as that route's request and the owner's
//! JSON answer mapped back: a success into the RPC's response, an error (`{"error": {"code",
//! "message"}}`) into the status its code maps to, as if the owner had answered over gRPC.

use axum::body::Bytes;
use axum::http::{HeaderValue, Method, Request, StatusCode, header};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tonic::Status;

use super::status::{from_api, status, with_retry_after};
use crate::api::forward::{Forwarder, forward};
use crate::domain::{Command, CommandId, RoomId, UserId};

/// The largest owner's answer read back (a members page of 1,000 is about 100 KB).
const ANSWER_LIMIT: usize = 4 << 20;

/// The HTTP request of an RPC, for the owner of its room.
#[derive(Debug)]
pub(super) struct Call {
    method: Method,
    path: String,
    body: Option<Value>,
}

impl Call {
    /// The route of `command` for `room_id` under `command_id`.
    pub(super) fn command(room_id: &RoomId, command_id: &CommandId, command: &Command) -> Self {
        let id = command_id.as_str();
        let (action, body) = match command {
            Command::CreateRoom { owner_id, title } => {
                let body =
                    json!({"command_id": id, "room_id": room_id, "owner_id": owner_id, "title": title});
                return Self { method: Method::POST, path: "/v1/rooms".into(), body: Some(body) };
            }
            Command::JoinRoom { user_id } => ("join", json!({"command_id": id, "user_id": user_id})),
            Command::LeaveRoom { user_id, .. } => ("leave", json!({"command_id": id, "user_id": user_id})),
            Command::SendGift { sender_id, receiver_id, gift_id, count, unit_value } => (
                "gifts",
                json!({"command_id": id, "sender_id": sender_id, "receiver_id": receiver_id,
                       "gift_id": gift_id, "count": count, "unit_value": unit_value}),
            ),
            Command::CloseRoom => ("close", json!({"command_id": id})),
        };
        Self { method: Method::POST, path: format!("/v1/rooms/{room_id}/{action}"), body: Some(body) }
    }

    /// `POST /v1/rooms/{room_id}/heartbeat`.
    pub(super) fn heartbeat(room_id: &RoomId, user_id: &UserId) -> Self {
        let body = Some(json!({"user_id": user_id}));
        Self { method: Method::POST, path: format!("/v1/rooms/{room_id}/heartbeat"), body }
    }

    /// `POST /v1/rooms/{room_id}/heartbeats`.
    pub(super) fn heartbeats(room_id: &RoomId, user_ids: &[UserId]) -> Self {
        let body = Some(json!({"user_ids": user_ids}));
        Self { method: Method::POST, path: format!("/v1/rooms/{room_id}/heartbeats"), body }
    }

    /// `GET /v1/rooms/{room_id}`.
    pub(super) fn snapshot(room_id: &RoomId) -> Self {
        Self { method: Method::GET, path: format!("/v1/rooms/{room_id}"), body: None }
    }

    /// `GET /v1/rooms/{room_id}/members?limit=…[&after=…]`.
    pub(super) fn members(room_id: &RoomId, after: Option<&UserId>, limit: usize) -> Self {
        let after = after.map(|a| format!("&after={a}")).unwrap_or_default();
        Self {
            method: Method::GET,
            path: format!("/v1/rooms/{room_id}/members?limit={limit}{after}"),
            body: None,
        }
    }

    /// False when the path holds a `.` or `..` segment, which a URL resolves away: a room of
    /// that name cannot be reached on the owner's route, and is served by its owner only.
    fn reachable(&self) -> bool {
        !self.path.split(['/', '?']).any(|segment| segment == "." || segment == "..")
    }

    /// Sends the call to the owner of `room_id` with the caller's `authorization` (the owner
    /// verifies it) and reads its answer as `T` (a `204 No Content` reads as JSON `null`).
    pub(super) async fn send<T: DeserializeOwned>(
        self,
        forwarder: &Forwarder,
        room_id: &RoomId,
        request_id: &str,
        authorization: Option<&[u8]>,
    ) -> Result<T, Status> {
        if !self.reachable() {
            return Err(status(
                "not_owner",
                format!("room {room_id} is served by its owner only; send the call there"),
            ));
        }
        let mut request = Request::builder().method(self.method).uri(self.path);
        request = request.header(header::CONTENT_TYPE, "application/json");
        // Always a valid request id (the gRPC edge replaced any other).
        if let Ok(request_id) = HeaderValue::from_str(request_id) {
            request = request.header(crate::api::edge::REQUEST_ID, request_id);
        }
        // The credential's raw bytes (not only a visible-ASCII one): the owner refuses what the
        // caller sent, never a hop without it.
        if let Some(credential) = authorization.and_then(|c| HeaderValue::from_bytes(c).ok()) {
            request = request.header(header::AUTHORIZATION, credential);
        }
        let request = request
            .body(())
            .map_err(|e| Status::internal(format!("cannot build the forwarded request: {e}")))?;
        let body = self.body.map(|b| Bytes::from(b.to_string())).unwrap_or_default();
        // The error this node answers in the owner's stead maps as the owner's would.
        let answer = forward(forwarder, room_id.as_str(), &request, body).await.map_err(from_api)?;
        let code = answer.status;
        let retry_after = answer.headers.get(header::RETRY_AFTER).and_then(|v| v.to_str().ok()?.parse().ok());
        if answer.body.len() > ANSWER_LIMIT {
            return Err(owner_unavailable("its answer could not be read"));
        }
        let body = answer.body;
        if code.is_success() {
            let body: &[u8] = if code == StatusCode::NO_CONTENT { b"null" } else { &body };
            return serde_json::from_slice(body)
                .map_err(|_| owner_unavailable("its answer is not the expected JSON"));
        }
        let mut refused = match serde_json::from_slice::<ErrorBody>(&body) {
            Ok(ErrorBody { error }) => status(&error.code, error.message),
            Err(_) => owner_unavailable(&format!("it answered {code} without an error body")),
        };
        if let Some(seconds) = retry_after {
            with_retry_after(&mut refused, seconds);
        }
        Err(refused)
    }
}

/// `{"error": {"code", "message"}}`, the error body of every route.
#[derive(serde::Deserialize)]
struct ErrorBody {
    error: ErrorFields,
}

#[derive(serde::Deserialize)]
struct ErrorFields {
    code: String,
    message: String,
}

fn owner_unavailable(why: &str) -> Status {
    status("owner_unavailable", format!("the room's owner could not serve the call: {why}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::GiftId;

    fn ids() -> (RoomId, CommandId, UserId) {
        (RoomId::parse("r-1").unwrap(), CommandId::parse("c-1").unwrap(), UserId::parse("u").unwrap())
    }

    #[test]
    fn every_command_goes_to_its_http_route_with_its_body() {
        let (room, id, user) = ids();
        let create =
            Call::command(&room, &id, &Command::CreateRoom { owner_id: user.clone(), title: "t".into() });
        assert_eq!((create.method.as_str(), create.path.as_str()), ("POST", "/v1/rooms"));
        assert_eq!(
            create.body,
            Some(json!({"command_id": "c-1", "room_id": "r-1", "owner_id": "u", "title": "t"}))
        );
        let gift = Command::SendGift {
            sender_id: user.clone(),
            receiver_id: UserId::parse("v").unwrap(),
            gift_id: GiftId::parse("rose").unwrap(),
            count: 2,
            unit_value: 5,
        };
        let gift = Call::command(&room, &id, &gift);
        assert_eq!(gift.path, "/v1/rooms/r-1/gifts");
        let expected = json!({"command_id": "c-1", "sender_id": "u", "receiver_id": "v", "gift_id": "rose",
                              "count": 2, "unit_value": 5});
        assert_eq!(gift.body, Some(expected));
        let leave = Command::LeaveRoom { user_id: user.clone(), reason: crate::domain::LeaveReason::User };
        assert_eq!(Call::command(&room, &id, &leave).path, "/v1/rooms/r-1/leave");
        assert_eq!(
            Call::command(&room, &id, &Command::JoinRoom { user_id: user }).path,
            "/v1/rooms/r-1/join"
        );
        let close = Call::command(&room, &id, &Command::CloseRoom);
        assert_eq!(
            (close.path.as_str(), close.body),
            ("/v1/rooms/r-1/close", Some(json!({"command_id": "c-1"})))
        );
    }

    #[test]
    fn reads_go_to_their_routes() {
        let (room, _, user) = ids();
        assert_eq!(Call::snapshot(&room).path, "/v1/rooms/r-1");
        assert_eq!(Call::members(&room, None, 10).path, "/v1/rooms/r-1/members?limit=10");
        assert_eq!(Call::members(&room, Some(&user), 5).path, "/v1/rooms/r-1/members?limit=5&after=u");
        let heartbeat = Call::heartbeat(&room, &user);
        assert_eq!((heartbeat.method, heartbeat.body), (Method::POST, Some(json!({"user_id": "u"}))));
        let heartbeats = Call::heartbeats(&room, std::slice::from_ref(&user));
        assert_eq!(heartbeats.path, "/v1/rooms/r-1/heartbeats");
        assert_eq!((heartbeats.method, heartbeats.body), (Method::POST, Some(json!({"user_ids": ["u"]}))));
    }

    #[test]
    fn rooms_named_like_dot_segments_are_not_forwarded_on_a_path() {
        let (_, id, user) = ids();
        for name in [".", ".."] {
            let room = RoomId::parse(name).unwrap();
            assert!(!Call::snapshot(&room).reachable(), "{name}");
            assert!(!Call::command(&room, &id, &Command::CloseRoom).reachable(), "{name}");
            // A create names its room in the body.
            let create = Command::CreateRoom { owner_id: user.clone(), title: "t".into() };
            assert!(Call::command(&room, &id, &create).reachable(), "{name}");
        }
        let dotted = RoomId::parse("...").unwrap();
        assert!(Call::members(&dotted, Some(&UserId::parse("..").unwrap()), 5).reachable());
    }
}
