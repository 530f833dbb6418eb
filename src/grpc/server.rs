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
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http2;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::http::server::ServeOptions;
use crate::telemetry::names;

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
    let slots = Arc::new(Semaphore::new(options.max_connections));
    let graceful = GracefulShutdown::new();
    let connections = TaskTracker::new();
    let abort = CancellationToken::new();
    let open = metrics::gauge!(names::HTTP_CONNECTIONS, names::LABEL_LISTENER => options.listener);
    let refused =
        metrics::counter!(names::HTTP_CONNECTIONS_REFUSED_TOTAL, names::LABEL_LISTENER => options.listener);
    refused.increment(0);
    open.increment(0.0);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _peer)) => stream,
                Err(error) => {
                    tracing::warn!(%error, "Failed to accept a gRPC connection");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            tracing::debug!("Too many open gRPC connections; closing a new one");
            refused.increment(1);
            continue;
        };
        open.increment(1.0);
        let gauge = open.clone();
        let _ = stream.set_nodelay(true);
        let service = TowerToHyperService::new(router.clone());
        let connection = graceful.watch(builder.serve_connection(TokioIo::new(stream), service));
        let abort = abort.clone();
        connections.spawn(async move {
            tokio::select! {
                ended = connection => if let Err(error) = ended {
                    tracing::debug!(%error, "gRPC connection ended with an error");
                },
                () = abort.cancelled() => {}
            }
            drop(slot);
            gauge.decrement(1.0);
        });
    }
    drop(listener);
    connections.close();
    if tokio::time::timeout(options.shutdown_timeout, graceful.shutdown()).await.is_err() {
        tracing::warn!(
            timeout = ?options.shutdown_timeout,
            "Open gRPC calls did not finish in http.shutdown_timeout; dropping them"
        );
    }
    abort.cancel();
    connections.wait().await;
    Ok(())
}
