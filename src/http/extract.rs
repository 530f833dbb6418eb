//! Extractors that answer bad input with our JSON error body instead of axum's plain text.

use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use super::error::ApiError;
use crate::domain::RoomId;

/// `axum::Json` with [`ApiError`] rejections (400 naming the field, 413, 415).
pub struct Json<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for Json<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let axum::Json(value) = axum::Json::<T>::from_request(req, state).await?;
        Ok(Json(value))
    }
}

/// The `{room_id}` path segment, validated.
pub struct RoomPath(pub RoomId);

impl<S: Send + Sync> FromRequestParts<S> for RoomPath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let axum::extract::Path(raw) =
            axum::extract::Path::<String>::from_request_parts(parts, state).await?;
        RoomId::parse(raw).map(RoomPath).map_err(|e| ApiError::invalid("room_id", e))
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

/// The request id: taken from `x-request-id` (set by the request-id layer when absent).
pub struct RequestId(pub String);

impl<S: Send + Sync> FromRequestParts<S> for RequestId {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        let value = parts.headers.get("x-request-id").map(|v| v.to_str().map(str::to_owned));
        match value {
            None => Ok(RequestId(uuid::Uuid::now_v7().to_string())),
            Some(Ok(v))
                if !v.is_empty() && v.len() <= 128 && v.bytes().all(|b| (0x20..=0x7e).contains(&b)) =>
            {
                Ok(RequestId(v))
            }
            Some(_) => Err(ApiError::invalid("x-request-id", "must be 1–128 printable ASCII characters")),
        }
    }
}
