//! The accept loop every listener shares ([`accept_loop`]): a cap on open connections (one
//! over it is refused at once, [`refuse`]), their count (`room_http_connections`,
//! `room_http_connections_refused_total`), and the bounded graceful shutdown: stop accepting,
//! let open connections finish for at most `http.shutdown_timeout`, drop what is left.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::ServeOptions;
use crate::telemetry::names;

/// The body of the answer to a connection over `max_connections`.
const OVERLOADED_BODY: &str =
    r#"{"error":{"code":"overloaded","message":"too many open connections; retry shortly"}}"#;

/// The accept loop every listener shares: admits connections up to `options.max_connections`
/// (a connection beyond it goes to `refuse`, which must not block), hands each admitted one to
/// `connection` (which serves it, and closes it gracefully once its token is cancelled),
/// counts them, and once `shutdown` completes stops accepting, lets open connections finish
/// for at most `options.shutdown_timeout`, and drops what is left.
pub(super) async fn accept_loop<C, F>(
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
pub(super) fn refuse(stream: TcpStream) {
    let answer = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nconnection: close\r\n\
         retry-after: 1\r\ncontent-length: {}\r\n\r\n{OVERLOADED_BODY}",
        OVERLOADED_BODY.len()
    );
    let _ = stream.try_write(answer.as_bytes());
}
