//! The JSON error body `{"error":{"code","message"}}` of an [`ApiError`], and how axum's
//! rejections of a request map onto it. How every other failure maps onto an [`ApiError`] is
//! the API's ([`crate::api::error`]).

use axum::Json;
use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::api::ApiError;

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut body = json!({"error": {"code": self.code, "message": self.message}});
        if let Some(until_ms) = self.until_ms {
            body["error"]["until_ms"] = json!(until_ms);
        }
        let mut response = (self.status, Json(body)).into_response();
        if let Some(challenge) = self.challenge {
            response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static(challenge));
        }
        if let Some(seconds) = self.retry_after {
            response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}

impl From<JsonRejection> for ApiError {
    fn from(r: JsonRejection) -> Self {
        match r.status() {
            StatusCode::PAYLOAD_TOO_LARGE => ApiError::too_large(),
            StatusCode::UNSUPPORTED_MEDIA_TYPE => ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                "expected a JSON body with content-type: application/json",
            ),
            _ => ApiError::new(StatusCode::BAD_REQUEST, "invalid_argument", r.body_text()),
        }
    }
}

impl From<PathRejection> for ApiError {
    fn from(r: PathRejection) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, "invalid_argument", r.body_text())
    }
}

impl From<QueryRejection> for ApiError {
    fn from(r: QueryRejection) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, "invalid_argument", r.body_text())
    }
}
