//! The gRPC accept loop: HTTP/2 (prior knowledge, as gRPC clients speak it) through hyper's
//! connection builder, bounded like the HTTP listeners (`http.*`):
//! - at most `max_connections` open connections (a new one beyond it is closed at once);
//!   counted like the HTTP listeners', with `listener="grpc"`;
//! - HTTP/2 keep-alive pings every `idle_timeout`, so a peer that vanished is dropped;
//! - a bounded graceful shutdown: once `shutdown` completes, no new connection is accepted,
//!   open calls get `shutdown_timeout` to finish (HTTP/2 GOAWAY), then connections are dropped.
//!
//! The request id, span and deadline are the router's ([`super::router`]).

use std::io;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http2;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};

use crate::http::server::{ServeOptions, accept_loop};

/// How long a keep-alive ping may go unanswered before the connection is dropped.
const KEEP_ALIVE_TIMEOUT: Duration = Duration::from_secs(20);

/// Serves `router` on `listener` until `shutdown` completes; see the module docs.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    options: ServeOptions,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    let mut builder = http2::Builder::new(TokioExecutor::new());
    builder
        .timer(TokioTimer::new())
        .keep_alive_interval(Some(options.idle_timeout))
        .keep_alive_timeout(KEEP_ALIVE_TIMEOUT);
    let connection = |stream: TcpStream, graceful: &GracefulShutdown| {
        let service = TowerToHyperService::new(router.clone());
        let connection = graceful.watch(builder.serve_connection(TokioIo::new(stream), service));
        async move {
            if let Err(error) = connection.await {
                tracing::debug!(%error, "gRPC connection ended with an error");
            }
        }
    };
    // A connection over the cap is closed at once (dropped): a gRPC client reconnects.
    accept_loop(listener, &options, shutdown, drop, connection).await
}
