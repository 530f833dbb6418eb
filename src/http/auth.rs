//! Bearer-token authentication of the admin listener (`http.admin_token`).

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::http::header::{AUTHORIZATION, WWW_AUTHENTICATE};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq;

use super::error::ApiError;
use crate::secret::Secret;

/// The token every admin request must present.
#[derive(Clone)]
pub struct BearerToken(Arc<Secret>);

impl BearerToken {
    /// Wraps the configured token.
    pub fn new(token: Secret) -> Self {
        Self(Arc::new(token))
    }

    /// True when `header` is `Bearer <token>` (the scheme in any case, RFC 7235, as on the
    /// public API); the comparison takes the same time wherever the first differing byte is.
    fn accepts(&self, header: Option<&[u8]>) -> bool {
        let Some(given) = header.and_then(crate::auth::bearer) else {
            return false;
        };
        given.ct_eq(self.0.expose().as_bytes()).into()
    }
}

/// Middleware: 401 JSON (with `WWW-Authenticate: Bearer`) unless the request carries the token.
pub async fn require(State(token): State<BearerToken>, request: Request, next: Next) -> Response {
    if token.accepts(request.headers().get(AUTHORIZATION).map(|v| v.as_bytes())) {
        return next.run(request).await;
    }
    tracing::warn!(path = %request.uri().path(), "Admin request refused: missing or wrong bearer token");
    let mut response = ApiError::new(
        StatusCode::UNAUTHORIZED,
        "unauthorized",
        "admin routes need Authorization: Bearer <http.admin_token>",
    )
    .into_response();
    response.headers_mut().insert(WWW_AUTHENTICATE, axum::http::HeaderValue::from_static("Bearer"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_exact_bearer_token_is_accepted_whatever_the_schemes_case() {
        let token = BearerToken::new(Secret::new("s3cret"));
        for right in [&b"Bearer s3cret"[..], b"bearer s3cret", b"BEARER s3cret"] {
            assert!(token.accepts(Some(right)), "{:?}", String::from_utf8_lossy(right));
        }
        for wrong in [&b"Bearer s3cre"[..], b"Bearer s3cret2", b"s3cret", b"Bearer ", b"Basic s3cret"] {
            assert!(!token.accepts(Some(wrong)), "{:?}", String::from_utf8_lossy(wrong));
        }
        assert!(!token.accepts(None));
    }
}
