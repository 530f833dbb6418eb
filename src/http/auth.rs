//! Bearer-token authentication of the admin listener (`http.admin_token`).

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::http::header::{AUTHORIZATION, WWW_AUTHENTICATE};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::api::ApiError;
use crate::secret::Secret;

/// The token every admin request must present, kept as its SHA-256 digest.
#[derive(Clone)]
pub struct BearerToken(Arc<[u8; 32]>);

impl BearerToken {
    /// Wraps the configured token.
    pub fn new(token: Secret) -> Self {
        Self(Arc::new(digest(token.expose().as_bytes())))
    }

    /// True when `header` is `Bearer <token>` (the scheme in any case, RFC 7235, as on the
    /// public API). The digests of the presented and the configured token are compared in
    /// constant time, so neither the first differing byte nor the token's length shows in the
    /// time taken.
    fn accepts(&self, header: Option<&[u8]>) -> bool {
        let Some(given) = header.and_then(crate::auth::bearer) else {
            return false;
        };
        same_digest(given, &self.0)
    }
}

fn digest(token: &[u8]) -> [u8; 32] {
    Sha256::digest(token).into()
}

/// True when `given`'s SHA-256 is `expected` (compared in constant time).
fn same_digest(given: &[u8], expected: &[u8; 32]) -> bool {
    digest(given).ct_eq(expected).into()
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

    #[test]
    fn tokens_are_compared_as_digests_whatever_their_lengths() {
        let expected = digest(b"s3cret");
        assert!(same_digest(b"s3cret", &expected), "equal");
        assert!(!same_digest(b"s3creT", &expected), "same length, different");
        for other in [&b""[..], b"s", b"s3cret!", &[b'x'; 4096]] {
            assert!(!same_digest(other, &expected), "different length: {}", other.len());
        }
        // What is compared is always 32 bytes: the configured token's length is never read.
        let token = BearerToken::new(Secret::new("s3cret"));
        assert_eq!(token.0.len(), 32);
        assert_eq!(*token.0, expected);
    }
}
