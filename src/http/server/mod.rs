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
//!
//! Here are the options and [`serve`]; how a connection is served on each protocol is in
//! `protocol`, and the accept loop every listener shares (the cap, the count, the bounded
//! shutdown) in `accept`.

mod accept;
pub mod activity;
mod protocol;

use std::io;
use std::time::Duration;

use axum::Router;
use tokio::net::TcpListener;

use crate::config::HttpSettings;

/// How long a client may take to send its request headers.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

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
        Protocol::Http1 => protocol::serve_http1(listener, router, options, shutdown).await,
        Protocol::Http2 => protocol::serve_http2(listener, router, options, shutdown).await,
    }
}
