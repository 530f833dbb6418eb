//! Who a public request is from (SPEC §12.3): the middleware of the `/v1/rooms` routes that
//! verifies the `Authorization` bearer token with the service's [`Auth`](crate::auth::Auth)
//! and puts the [`Caller`] in the request's extensions for the handlers (a refusal answers 401
//! with `WWW-Authenticate` and is counted). Reads pass without a token while
//! `auth.public_reads`. It runs before the handlers, which forward a request for a room another
//! node owns: a request is verified where it arrives (a bad token never travels), and again by
//! the owner it is forwarded to, which gets the very header (`http::hop`).

use axum::extract::{FromRequestParts, Request, State};
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::api::dispatch::verify_caller;
use crate::api::{ApiError, AppState};
use crate::auth::Caller;

/// The middleware: authenticates the request (reads only when they are not public).
pub async fn authenticate(State(state): State<AppState>, mut request: Request, next: Next) -> Response {
    // A page of mutes and bans is the moderators' (SPEC §14.2), the seat requests are the
    // moderators' and each requester's: never a public read.
    let path = request.uri().path();
    let read = request.method() == Method::GET && !path.ends_with("/moderation") && !path.ends_with("/seats");
    let authorization = request.headers().get(AUTHORIZATION).map(|v| v.as_bytes());
    match verify_caller(&state.auth, authorization, read).await {
        Ok(caller) => {
            request.extensions_mut().insert(caller);
            next.run(request).await
        }
        Err(refused) => refused.into_response(),
    }
}

/// The caller [`authenticate`] found. A route without that middleware has no caller and
/// answers 500 rather than act for nobody in particular.
impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        parts.extensions.get::<Caller>().cloned().ok_or_else(|| {
            tracing::error!("A room route ran without the caller middleware");
            ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", "the request's caller is unknown")
        })
    }
}
