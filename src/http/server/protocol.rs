//! How one connection is served on each protocol: HTTP/1.1 ([`serve_http1`]: a header-read
//! timeout, the idle timeout on the socket, half-close) and HTTP/2 for gRPC ([`serve_http2`]:
//! bounded streams and windows, keep-alive pings, closed once unused, see [`activity`]).
//! Every request carries its peer's address, and a connection asked to close finishes what it
//! is answering first.

use std::io;
use std::pin::{Pin, pin};
use std::time::Duration;

use axum::Router;
use hyper::server::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio_io_timeout::TimeoutStream;
use tokio_util::sync::CancellationToken;

use super::accept::{accept_loop, refuse};
use super::{
    CONNECTION_WINDOW, MAX_CONCURRENT_STREAMS, MAX_HEADER_LIST_BYTES, STREAM_WINDOW, ServeOptions, activity,
};

/// How long an HTTP/2 keep-alive ping may go unanswered before the connection is dropped.
const KEEP_ALIVE_TIMEOUT: Duration = Duration::from_secs(20);

/// [`super::serve`] for an HTTP/1.1 listener: a connection over the cap is answered `503
/// overloaded`.
pub(super) async fn serve_http1(
    listener: TcpListener,
    router: Router,
    options: ServeOptions,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    let mut builder = http1::Builder::new();
    // Half-close: hyper then does not read the socket while a handler runs (it would,
    // to detect a hang-up), so the idle timeout below never cuts a request being
    // answered, and a command whose client left still commits and answers into the void.
    builder.timer(TokioTimer::new()).header_read_timeout(options.header_read_timeout).half_close(true);
    let connection = |stream: TcpStream, drain: CancellationToken| {
        let router = with_peer(&router, stream.peer_addr().ok());
        let mut stream = TimeoutStream::new(stream);
        stream.set_read_timeout(Some(options.idle_timeout));
        stream.set_write_timeout(Some(options.idle_timeout));
        let service = TowerToHyperService::new(router);
        let stream = TokioIo::new(Box::pin(stream));
        let served = builder.serve_connection(stream, service);
        logged(drained(served, drain.cancelled_owned(), |c| c.graceful_shutdown()), options.listener)
    };
    accept_loop(listener, &options, shutdown, refuse, connection).await
}

/// [`super::serve`] for the gRPC listener (HTTP/2 with prior knowledge).
pub(super) async fn serve_http2(
    listener: TcpListener,
    router: Router,
    options: ServeOptions,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    let mut builder = http2::Builder::new(TokioExecutor::new());
    builder
        .timer(TokioTimer::new())
        .keep_alive_interval(Some(options.idle_timeout))
        .keep_alive_timeout(KEEP_ALIVE_TIMEOUT)
        .max_concurrent_streams(MAX_CONCURRENT_STREAMS)
        .initial_stream_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .max_header_list_size(MAX_HEADER_LIST_BYTES);
    let connection = |stream: TcpStream, drain: CancellationToken| {
        let (service, calls) = activity::track(with_peer(&router, stream.peer_addr().ok()));
        let served = builder.serve_connection(TokioIo::new(stream), TowerToHyperService::new(service));
        let listener = options.listener;
        let (header_read, idle) = (options.header_read_timeout, options.idle_timeout);
        // Closed (GOAWAY) at shutdown, or once it has had no call for too long.
        let close = async move {
            tokio::select! {
                () = drain.cancelled() => {}
                expired = calls.expired(header_read, idle) => {
                    tracing::debug!(listener, ?expired, "Closing an unused connection");
                }
            }
        };
        logged(drained(served, close, |c| c.graceful_shutdown()), listener)
    };
    // A connection over the cap is closed at once (dropped): a gRPC client reconnects.
    accept_loop(listener, &options, shutdown, drop, connection).await
}

/// `router` serving one connection from `peer`: every request carries the peer's
/// address as axum's [`ConnectInfo`](axum::extract::ConnectInfo) (what a per-client limit
/// counts an anonymous caller by; tonic hands request extensions on to its handlers).
fn with_peer(
    router: &Router,
    peer: Option<std::net::SocketAddr>,
) -> impl tower::Service<
    http::Request<hyper::body::Incoming>,
    Response = axum::response::Response,
    Error = std::convert::Infallible,
    Future: Send,
> + Clone
+ Send
+ 'static {
    use tower::ServiceExt;
    router.clone().map_request(move |mut request: http::Request<hyper::body::Incoming>| {
        if let Some(peer) = peer {
            request.extensions_mut().insert(axum::extract::ConnectInfo(peer));
        }
        request
    })
}

/// Serves `connection` to its end; once `close` completes, asks it to finish
/// (`graceful_shutdown`: HTTP/1 closes after the request being answered, HTTP/2 sends a GOAWAY
/// and lets open calls finish) and serves it to that end.
async fn drained<C, E>(
    connection: C,
    close: impl Future<Output = ()>,
    graceful_shutdown: impl FnOnce(Pin<&mut C>),
) -> Result<(), E>
where
    C: Future<Output = Result<(), E>>,
{
    let mut connection = pin!(connection);
    let ended = tokio::select! {
        ended = connection.as_mut() => Some(ended),
        () = close => None,
    };
    match ended {
        Some(ended) => ended,
        None => {
            graceful_shutdown(connection.as_mut());
            connection.await
        }
    }
}

/// Serves `connection` to its end, logging how it failed if it did.
async fn logged<E: std::fmt::Display>(
    connection: impl Future<Output = Result<(), E>>,
    listener: &'static str,
) {
    if let Err(error) = connection.await {
        tracing::debug!(%error, listener, "Connection ended with an error");
    }
}
