//! The accept loop of every listener, bounded in every direction a client could hold it open.
//!
//! `axum::serve` leaves all of this to the caller, so routers are served through hyper's
//! connection builders. The HTTP listeners (public, admin) speak HTTP/1.1 with:
//! - a header-read timeout (a client trickling its headers is cut off);
//! - an idle timeout on the socket (`http.idle_timeout`): a read that waits longer than that
//!   (nothing sent after connecting, between two requests, or in the middle of a body) or a
//!   write the client does not drain ends the connection;
//! - HTTP/1.1 only: an HTTP/2 preface is refused (the connection is closed) rather than
//!   negotiated.
//!
//! The gRPC listener speaks HTTP/2 (prior knowledge, as gRPC clients do), bounded so that no
//! client can make the node buffer much more than one maximum-size message per call:
//! - at most [`MAX_CONCURRENT_STREAMS`] calls open per connection;
//! - flow-control windows sized for the largest message ([`STREAM_WINDOW`], the batch
//!   heartbeat's 72 KiB and its frame header; [`CONNECTION_WINDOW`]): a client cannot send
//!   more than that ahead of what the service has read;
//! - a header-read timeout (the first call must start within it) and an idle timeout
//!   (`http.idle_timeout`: no call open for that long), after which the connection is closed
//!   with a GOAWAY ([`activity`]); keep-alive pings every `http.idle_timeout`, so a peer that
//!   vanished is dropped.
//!
//! Every listener has:
//! - a cap on open connections (`http.max_connections`): beyond it, a new HTTP connection gets
//!   a canned `503 overloaded` and is closed (a gRPC one is closed at once: its client
//!   reconnects), well before the process runs out of file descriptors and stops accepting
//!   anything (health checks included);
//! - a bounded graceful shutdown (`http.shutdown_timeout`): open requests get that long to
//!   finish (HTTP/2: GOAWAY), then every remaining connection is dropped so the stop order can
//!   go on.

pub mod activity;

use std::io;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_io_timeout::TimeoutStream;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::HttpSettings;
use crate::telemetry::names;

/// How long a client may take to send its request headers.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// How long an HTTP/2 keep-alive ping may go unanswered before the connection is dropped.
const KEEP_ALIVE_TIMEOUT: Duration = Duration::from_secs(20);

/// Most calls open at once on one gRPC connection (HTTP/2 `SETTINGS_MAX_CONCURRENT_STREAMS`;
/// hyper's default is 200).
pub const MAX_CONCURRENT_STREAMS: u32 = 64;

/// The length-prefix of a gRPC message: a compression flag and a 4-byte length.
const GRPC_FRAME_HEADER_BYTES: usize = 5;

/// The initial flow-control window of one gRPC call: the largest message (the batch
/// heartbeat's) with its frame header, so such a message arrives in one window and a call can
/// never send more than that ahead of what the service has read (hyper's default is 1 MiB).
pub const STREAM_WINDOW: u32 = (crate::api::BATCH_HEARTBEAT_BYTES + GRPC_FRAME_HEADER_BYTES) as u32;

/// The initial flow-control window of one gRPC connection: four maximum-size messages on their
/// way at once (hyper's default is 1 MiB).
pub const CONNECTION_WINDOW: u32 = 4 * STREAM_WINDOW;

/// Largest header block of one gRPC call (`SETTINGS_MAX_HEADER_LIST_SIZE`; hyper's default).
pub const MAX_HEADER_LIST_BYTES: u32 = 16 * 1024;

/// The body of the answer to a connection over `max_connections`.
const OVERLOADED_BODY: &str =
    r#"{"error":{"code":"overloaded","message":"too many open connections; retry shortly"}}"#;

/// What a listener speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// HTTP/1.1 only: the public and admin APIs.
    Http1,
    /// HTTP/2 with prior knowledge: gRPC.
    Http2,
}

/// How one listener serves its connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServeOptions {
    /// `public`, `admin` or `grpc`: the `listener` label of the connection metrics and log
    /// lines.
    pub listener: &'static str,
    /// What the listener speaks.
    pub protocol: Protocol,
    /// How long a client may take to send its request headers.
    pub header_read_timeout: Duration,
    /// A read or write on the socket that waits this long ends the connection.
    pub idle_timeout: Duration,
    /// Most connections open at once.
    pub max_connections: usize,
    /// Longest wait for open connections at shutdown.
    pub shutdown_timeout: Duration,
}

impl ServeOptions {
    /// The options of HTTP/1.1 listener `listener` from `http.*`.
    pub fn new(listener: &'static str, http: &HttpSettings) -> Self {
        Self {
            listener,
            protocol: Protocol::Http1,
            header_read_timeout: HEADER_READ_TIMEOUT.min(http.idle_timeout),
            idle_timeout: http.idle_timeout,
            max_connections: http.max_connections,
            shutdown_timeout: http.shutdown_timeout,
        }
    }

    /// The options of the gRPC listener from `http.*`.
    pub fn grpc(http: &HttpSettings) -> Self {
        Self { protocol: Protocol::Http2, ..Self::new("grpc", http) }
    }
}

/// Serves `router` on `listener` until `shutdown` completes, then stops accepting, lets open
/// requests finish for at most `options.shutdown_timeout`, and drops what is left.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    options: ServeOptions,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    match options.protocol {
        Protocol::Http1 => {
            let mut builder = http1::Builder::new();
            // Half-close: hyper then does not read the socket while a handler runs (it would,
            // to detect a hang-up), so the idle timeout below never cuts a request being
            // answered, and a command whose client left still commits and answers into the void.
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(options.header_read_timeout)
                .half_close(true);
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
        Protocol::Http2 => {
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
                let served =
                    builder.serve_connection(TokioIo::new(stream), TowerToHyperService::new(service));
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
    }
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

/// The accept loop every listener shares: admits connections up to `options.max_connections`
/// (a connection beyond it goes to `refuse`, which must not block), hands each admitted one to
/// `connection` (which serves it, and closes it gracefully once its token is cancelled),
/// counts them, and once `shutdown` completes stops accepting, lets open connections finish
/// for at most `options.shutdown_timeout`, and drops what is left.
async fn accept_loop<C, F>(
    listener: TcpListener,
    options: &ServeOptions,
    shutdown: impl Future<Output = ()>,
    refuse: fn(TcpStream),
    connection: C,
) -> io::Result<()>
where
    C: Fn(TcpStream, CancellationToken) -> F,
    F: Future<Output = ()> + Send + 'static,
{
    let slots = Arc::new(Semaphore::new(options.max_connections));
    let drain = CancellationToken::new();
    let connections = TaskTracker::new();
    let abort = CancellationToken::new();
    let open = metrics::gauge!(names::HTTP_CONNECTIONS, names::LABEL_LISTENER => options.listener);
    let refused =
        metrics::counter!(names::HTTP_CONNECTIONS_REFUSED_TOTAL, names::LABEL_LISTENER => options.listener);
    // Exported from the start: the first refusal must show as an increase.
    refused.increment(0);
    open.increment(0.0);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _peer)) => stream,
                Err(error) => {
                    // Out of file descriptors and the like: back off, keep serving.
                    tracing::warn!(%error, listener = options.listener, "Failed to accept a connection");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            refused.increment(1);
            refuse(stream);
            continue;
        };
        let _ = stream.set_nodelay(true);
        let served = connection(stream, drain.clone());
        let abort = abort.clone();
        let open = OpenConnection::new(open.clone(), slot);
        connections.spawn(async move {
            tokio::select! {
                () = served => {}
                () = abort.cancelled() => {}
            }
            drop(open);
        });
    }
    drop(listener);
    connections.close();
    drain.cancel();
    if tokio::time::timeout(options.shutdown_timeout, connections.wait()).await.is_err() {
        tracing::warn!(
            listener = options.listener,
            open = options.max_connections - slots.available_permits(),
            timeout = ?options.shutdown_timeout,
            "Open connections did not finish in http.shutdown_timeout; dropping them"
        );
    }
    abort.cancel();
    connections.wait().await;
    Ok(())
}

/// One open connection: counted in the gauge and holding a slot of `max_connections` until it
/// is dropped, however its task ends (a panic included).
struct OpenConnection {
    gauge: metrics::Gauge,
    _slot: tokio::sync::OwnedSemaphorePermit,
}

impl OpenConnection {
    fn new(gauge: metrics::Gauge, slot: tokio::sync::OwnedSemaphorePermit) -> Self {
        gauge.increment(1.0);
        Self { gauge, _slot: slot }
    }
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.gauge.decrement(1.0);
    }
}

/// Answers a connection over the limit with a 503 and closes it, right away: the answer fits
/// the empty send buffer of a new socket, so refusing never holds a descriptor (a flood of
/// refusals must not be what exhausts them).
fn refuse(stream: TcpStream) {
    let answer = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nconnection: close\r\n\
         retry-after: 1\r\ncontent-length: {}\r\n\r\n{OVERLOADED_BODY}",
        OVERLOADED_BODY.len()
    );
    let _ = stream.try_write(answer.as_bytes());
}
