//! The edge of `room.v1.RoomService`, as the HTTP API's (`http::edge`) is for `/v1/*`
//! (SPEC §13.1 "gRPC edge = HTTP edge"):
//!
//! - load shedding ([`layer`]): beyond `http.max_in_flight` calls in flight on the gRPC listener
//!   (a budget of its own, the size of HTTP's), a new call is answered `RESOURCE_EXHAUSTED`
//!   (`error-code: overloaded`) at once, without reading its message;
//! - authentication from metadata ([`authenticate`]), before the message is read: a call that
//!   needs a token (every command; reads only when `auth.public_reads` is false) and has no
//!   valid one in its `authorization` entry is answered `UNAUTHENTICATED` from its headers, so
//!   a half-sent message without a token costs the node nothing. The caller it verified goes
//!   in the request's extensions ([`Authenticated`]) for the handler, which does not verify
//!   again.
//!
//! Per-method message limits are the routing's ([`super::router`]); the connection limits
//! (streams, flow-control windows, timeouts) are the listener's (`http::server`).

use axum::error_handling::HandleErrorLayer;
use axum::extract::{Request, State};
use axum::http::header::AUTHORIZATION;
use axum::middleware::Next;
use axum::response::Response;
use tonic::{Code, Status};
use tower::layer::util::{Identity, Stack};
use tower::limit::GlobalConcurrencyLimitLayer;
use tower::load_shed::LoadShedLayer;
use tower::load_shed::error::Overloaded;
use tower::{BoxError, ServiceBuilder};

use super::SERVICE_NAME;
use super::status::{ERROR_CODE, from_api};
use crate::auth::{Auth, Caller};
use crate::telemetry::names;

/// The caller [`authenticate`] verified from the call's metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authenticated(pub Caller);

/// What a method of the room service needs to be called.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// A command (the heartbeats included): always a token, unless `auth.mode` is `none`.
    Command,
    /// A read: a token only when `auth.public_reads` is false.
    Read,
}

/// The access of method `path` (`/room.v1.RoomService/<Method>`); `None` for a path that names
/// no method of the room service (tonic answers it `UNIMPLEMENTED`).
pub fn access(path: &str) -> Option<Access> {
    let method = path.strip_prefix('/')?.strip_prefix(SERVICE_NAME)?.strip_prefix('/')?;
    match method {
        "CreateRoom" | "JoinRoom" | "LeaveRoom" | "SendGift" | "CloseRoom" | "Heartbeat" | "Heartbeats" => {
            Some(Access::Command)
        }
        "GetRoom" | "ListMembers" | "ListEvents" => Some(Access::Read),
        _ => None,
    }
}

/// The middleware: answers a call that needs a token and has no valid one with
/// `UNAUTHENTICATED` (counted, as the handler would), before its message is read; passes the
/// others on, with the verified caller in their extensions.
pub async fn authenticate(State(auth): State<Auth>, mut request: Request, next: Next) -> Response {
    let needs_token = match access(request.uri().path()) {
        None => false,
        Some(Access::Read) => !auth.public_reads(),
        Some(Access::Command) => !auth.is_anonymous(),
    };
    if !needs_token {
        return next.run(request).await;
    }
    let authorization = request.headers().get(AUTHORIZATION).map(|v| v.as_bytes());
    match auth.authenticate(authorization).await {
        Ok(caller) => {
            request.extensions_mut().insert(Authenticated(caller));
            next.run(request).await
        }
        Err(refused) => from_api(refused.counted().into()).into_http(),
    }
}

/// The layers [`layer`] returns, outermost last.
pub type EdgeLayer = ServiceBuilder<
    Stack<
        GlobalConcurrencyLimitLayer,
        Stack<LoadShedLayer, Stack<HandleErrorLayer<HandleEdgeError, ()>, Identity>>,
    >,
>;

/// The error handler's type, named so that [`layer`] can be returned.
pub type HandleEdgeError = fn(BoxError) -> std::future::Ready<Response>;

/// The shedding layers of the room service: outermost the error mapping, then load shedding
/// over a concurrency limit shared by every method. The call's deadline is the router's.
pub fn layer(max_in_flight: usize) -> EdgeLayer {
    ServiceBuilder::new()
        .layer(HandleErrorLayer::new(handle_error as HandleEdgeError))
        .load_shed()
        .layer(GlobalConcurrencyLimitLayer::new(max_in_flight))
}

/// `RESOURCE_EXHAUSTED` with `error-code: overloaded`: too many calls in flight.
pub fn overloaded() -> Status {
    let mut status = Status::new(Code::ResourceExhausted, "too many calls in flight; retry shortly");
    status.metadata_mut().insert(ERROR_CODE, "overloaded".parse().expect("a valid metadata value"));
    status
}

/// Maps an edge error onto a gRPC status.
fn handle_error(error: BoxError) -> std::future::Ready<Response> {
    let status = if error.is::<Overloaded>() {
        metrics::counter!(names::GRPC_CALLS_SHED_TOTAL).increment(1);
        overloaded()
    } else {
        tracing::error!(%error, "Call failed in the gRPC edge");
        Status::internal("internal error")
    };
    std::future::ready(status.into_http())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use axum::Router;
    use axum::body::Body;
    use axum::http::HeaderMap;
    use tower::ServiceExt;

    use super::*;
    use crate::config::{AuthMode, AuthSettings, ServiceToken, UserSigSettings};
    use crate::secret::Secret;

    const SERVICE_TOKEN: &str = "gateway-token-0123456789abcdef-xyz";

    async fn auth(public_reads: bool) -> Auth {
        let settings = AuthSettings {
            mode: AuthMode::UserSig(UserSigSettings {
                sdk_app_id: 1_400_000_000,
                secret_key: Secret::new("5bd2850fff3ecb11d7c805251c51ee463a25727bddc2385f3fa8bfee1bb93b5e"),
            }),
            service_tokens: vec![ServiceToken { name: "gateway".into(), token: Secret::new(SERVICE_TOKEN) }],
            public_reads,
            ..AuthSettings::default()
        };
        Auth::from_settings(&settings, reqwest::Client::new()).await.expect("auth")
    }

    /// The room service's routes behind the middleware, with a handler counting the calls that
    /// reached it and answering the caller it was given.
    fn routes(auth: Auth, reached: Arc<AtomicUsize>) -> Router {
        let handler = move |request: Request| {
            reached.fetch_add(1, Ordering::SeqCst);
            let caller = request.extensions().get::<Authenticated>().map(|a| format!("{:?}", a.0));
            async move { caller.unwrap_or_default() }
        };
        Router::new()
            .route("/room.v1.RoomService/{*rest}", axum::routing::post(handler))
            .route_layer(axum::middleware::from_fn_with_state(auth, authenticate))
    }

    /// A call to `method` whose message never ends, with `token`.
    fn call(method: &str, token: Option<&str>) -> Request {
        let mut request = Request::post(format!("/room.v1.RoomService/{method}"))
            .header("content-type", "application/grpc")
            .body(Body::from_stream(futures::stream::pending::<Result<Vec<u8>, std::io::Error>>()))
            .unwrap();
        if let Some(token) = token {
            request.headers_mut().insert(AUTHORIZATION, format!("Bearer {token}").parse().unwrap());
        }
        request
    }

    fn grpc_status(headers: &HeaderMap) -> (&str, &str) {
        let value = |name| headers.get(name).map_or("", |v| v.to_str().unwrap());
        (value("grpc-status"), value(ERROR_CODE))
    }

    #[test]
    fn commands_and_reads_of_the_room_service_are_told_apart() {
        for method in
            ["CreateRoom", "JoinRoom", "LeaveRoom", "SendGift", "CloseRoom", "Heartbeat", "Heartbeats"]
        {
            assert_eq!(access(&format!("/room.v1.RoomService/{method}")), Some(Access::Command), "{method}");
        }
        for method in ["GetRoom", "ListMembers", "ListEvents"] {
            assert_eq!(access(&format!("/room.v1.RoomService/{method}")), Some(Access::Read), "{method}");
        }
        for other in
            ["/room.v1.RoomService/Nope", "/grpc.health.v1.Health/Check", "/room.v1.RoomServiceX/GetRoom"]
        {
            assert_eq!(access(other), None, "{other}");
        }
    }

    #[tokio::test]
    async fn a_command_without_a_valid_token_is_refused_before_its_message_is_read() {
        let reached = Arc::new(AtomicUsize::new(0));
        let routes = routes(auth(true).await, reached.clone());
        for token in [None, Some("not-a-token")] {
            // The message never ends: only an answer from the headers comes back at all.
            let answer = routes.clone().oneshot(call("Heartbeats", token)).await.unwrap();
            assert_eq!(grpc_status(answer.headers()), ("16", "unauthenticated"), "{token:?}");
        }
        assert_eq!(reached.load(Ordering::SeqCst), 0);
        let answer = routes.clone().oneshot(call("Heartbeats", Some(SERVICE_TOKEN))).await.unwrap();
        let body = axum::body::to_bytes(answer.into_body(), 1024).await.unwrap();
        assert_eq!(body, format!("{:?}", Caller::Service("gateway".into())));
        // A public read and an unknown method pass without a token (to the handler, to tonic).
        for method in ["GetRoom", "Nope"] {
            routes.clone().oneshot(call(method, None)).await.unwrap();
        }
        assert_eq!(reached.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn reads_need_a_token_when_they_are_not_public() {
        let reached = Arc::new(AtomicUsize::new(0));
        let routes = routes(auth(false).await, reached.clone());
        let answer = routes.clone().oneshot(call("ListMembers", None)).await.unwrap();
        assert_eq!(grpc_status(answer.headers()), ("16", "unauthenticated"));
        assert_eq!(reached.load(Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn beyond_max_in_flight_a_call_is_answered_resource_exhausted_at_once() {
        let (release, released) = tokio::sync::watch::channel(false);
        let handler = move || {
            let mut released = released.clone();
            async move {
                let _ = released.wait_for(|r| *r).await;
            }
        };
        let routes = Router::new()
            .route("/room.v1.RoomService/{*rest}", axum::routing::post(handler))
            .route_layer(layer(1));
        let held = tokio::spawn(routes.clone().oneshot(call("JoinRoom", None)));
        tokio::task::yield_now().await;
        let answer = routes.clone().oneshot(call("JoinRoom", None)).await.unwrap();
        assert_eq!(grpc_status(answer.headers()), ("8", "overloaded"));
        release.send(true).unwrap();
        assert_eq!(held.await.unwrap().unwrap().status(), 200);
    }
}
