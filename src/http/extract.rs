//! Extractors that answer bad input with our JSON error body instead of axum's plain text.

use std::fmt;

use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use serde::de::{Deserialize, DeserializeOwned, Deserializer, MapAccess, Visitor};

use crate::api::forward::FORWARDED_BY;
use crate::api::{ApiError, Credential, Sender};
use crate::auth::Caller;
use crate::domain::RoomId;
use crate::room::Transport;

/// A command route's request, read in this order: its [`Sender`] (the caller first), the room
/// from the path ([`RoomPath`]), then the JSON body ([`Json`]); the first bad part answers.
pub struct RoomCommand<B> {
    /// Who sent it.
    pub sender: Sender,
    /// The room of the path.
    pub room_id: RoomId,
    /// The body.
    pub body: B,
}

impl<B: DeserializeOwned + Send, S: Send + Sync> FromRequest<S> for RoomCommand<B> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let (mut parts, body) = req.into_parts();
        let sender = Sender::from_request_parts(&mut parts, state).await?;
        let RoomPath(room_id) = RoomPath::from_request_parts(&mut parts, state).await?;
        let Json(body) = Json::from_request(Request::from_parts(parts, body), state).await?;
        Ok(Self { sender, room_id, body })
    }
}

/// Who sent a `/v1/rooms` request: the [`Caller`] the caller middleware verified, its
/// `Authorization` as sent (for a hop to the room's owner), the [`RequestId`]; a request that
/// carries [`FORWARDED_BY`] (a hop of another node) is never forwarded again.
impl<S: Send + Sync> FromRequestParts<S> for Sender {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let caller = Caller::from_request_parts(parts, state).await?;
        let RequestId(request_id) = RequestId::from_request_parts(parts, state).await?;
        let credential = parts.headers.get(AUTHORIZATION).and_then(|v| Credential::from_bytes(v.as_bytes()));
        let hop = parts.headers.contains_key(FORWARDED_BY);
        Ok(Sender { hop, ..Sender::new(caller, credential, request_id, Transport::Http) })
    }
}

/// `axum::Json` with [`ApiError`] rejections (400 naming the field, 413, 415), taking the body
/// as a JSON object only (see [`ObjectOnly`]).
pub struct Json<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for Json<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let axum::Json(ObjectOnly(value)) = axum::Json::<ObjectOnly<T>>::from_request(req, state).await?;
        Ok(Json(value))
    }
}

/// A `T` decoded from a JSON object only. Serde's derived structs also accept a positional
/// array (`["c1","bob"]` as a join body), a form the API does not have and whose errors cannot
/// name a field; this wrapper refuses it ("invalid type: sequence, expected a JSON object")
/// and keeps everything else, the field paths of errors included.
pub struct ObjectOnly<T>(pub T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for ObjectOnly<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        T::deserialize(MapOnly(deserializer)).map(ObjectOnly)
    }
}

/// A deserializer that hands the visitor only maps.
struct MapOnly<D>(D);

impl<'de, D: Deserializer<'de>> Deserializer<'de> for MapOnly<D> {
    type Error = D::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        self.0.deserialize_any(MapOnlyVisitor(visitor))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_struct(name, fields, MapOnlyVisitor(visitor))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf option
        unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier ignored_any
    }
}

/// Passes a map on to the inner visitor; anything else is an invalid type.
struct MapOnlyVisitor<V>(V);

impl<'de, V: Visitor<'de>> Visitor<'de> for MapOnlyVisitor<V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        self.0.visit_map(map)
    }
}

/// The `{room_id}` path segment, validated.
pub struct RoomPath(pub RoomId);

impl<S: Send + Sync> FromRequestParts<S> for RoomPath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let raw = path_param(parts, state, "room_id").await?;
        RoomId::parse(raw).map(RoomPath).map_err(|e| ApiError::invalid("room_id", e))
    }
}

/// The path's parameter `name` (a route's template names it).
pub async fn path_param<S: Send + Sync>(
    parts: &mut Parts,
    state: &S,
    name: &str,
) -> Result<String, ApiError> {
    let axum::extract::Path(params) =
        axum::extract::Path::<Vec<(String, String)>>::from_request_parts(parts, state).await?;
    params
        .into_iter()
        .find_map(|(key, value)| (key == name).then_some(value))
        .ok_or_else(|| ApiError::invalid(name, "missing from the path"))
}

/// A query string's parameters, each named once: a repeated one (`?limit=1&limit=300`)
/// answers 400 naming it rather than letting one of the values win unseen.
pub struct QueryParams(pub Vec<(String, String)>);

impl<S: Send + Sync> FromRequestParts<S> for QueryParams {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let axum::extract::Query(params) =
            axum::extract::Query::<Vec<(String, String)>>::from_request_parts(parts, state).await?;
        for (i, (key, _)) in params.iter().enumerate() {
            if params[..i].iter().any(|(earlier, _)| earlier == key) {
                return Err(ApiError::invalid(key, "given more than once"));
            }
        }
        Ok(QueryParams(params))
    }
}

/// The address the request came from, when the listener recorded it (see
/// `http::server`); `None` for a request handed to the router in-process.
pub struct Peer(pub Option<std::net::IpAddr>);

impl<S: Send + Sync> FromRequestParts<S> for Peer {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let peer = parts.extensions.get::<axum::extract::ConnectInfo<std::net::SocketAddr>>();
        Ok(Peer(peer.map(|info| info.0.ip())))
    }
}

/// A page size from a query string: an integer from 1 to `max`, or a 400 naming `limit`.
pub fn page_limit(value: &str, max: u32) -> Result<u32, ApiError> {
    value
        .parse::<u32>()
        .ok()
        .filter(|l| (1..=max).contains(l))
        .ok_or_else(|| ApiError::invalid("limit", format!("must be an integer from 1 to {max}")))
}

/// The request id: `x-request-id` (set by the request-id layer when absent, and replaced
/// there when invalid), checked again by [`crate::api::edge::request_id`].
pub struct RequestId(pub String);

impl<S: Send + Sync> FromRequestParts<S> for RequestId {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        let header = parts.headers.get(crate::api::edge::REQUEST_ID).and_then(|v| v.to_str().ok());
        Ok(RequestId(crate::api::edge::request_id(header)))
    }
}
