//! The fakes' own accept loop (the fake IM's, shared with the fake wallet). `axum::serve`
//! cannot close one connection on request, and the "connection dropped without a response"
//! fault needs exactly that: each connection gets a [`DropConnection`] handle in its requests'
//! extensions; firing it drops the connection. A stop closes every open connection at once,
//! so a request held by a delay fault never holds a shutdown.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tokio::task::JoinSet;
use tower::ServiceExt;

/// Closes the connection a request came on, without a response.
#[derive(Clone, Debug)]
pub(crate) struct DropConnection(Arc<Notify>);

impl DropConnection {
    /// Fires: the connection is dropped, with the handler still waiting in it.
    pub(crate) fn now(&self) {
        self.0.notify_one();
    }
}

/// Accepts connections until `shutdown` completes, then aborts those still open.
pub(crate) async fn run(
    listener: TcpListener,
    router: Router,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    let mut connections = JoinSet::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    connections.spawn(serve_connection(stream, router.clone()));
                }
                Err(error) => {
                    // Out of file descriptors and the like: back off, keep serving.
                    tracing::warn!(%error, "Fake server failed to accept a connection");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    connections.shutdown().await;
    Ok(())
}

async fn serve_connection(stream: TcpStream, router: Router) {
    let _ = stream.set_nodelay(true);
    let kill = Arc::new(Notify::new());
    let handle = DropConnection(kill.clone());
    let service = tower::service_fn(move |mut request: axum::http::Request<Incoming>| {
        request.extensions_mut().insert(handle.clone());
        router.clone().oneshot(request.map(axum::body::Body::new))
    });
    let builder = Builder::new(TokioExecutor::new());
    let connection = builder.serve_connection(TokioIo::new(stream), TowerToHyperService::new(service));
    tokio::select! {
        _ = connection => {}
        () = kill.notified() => {}
    }
}

/// A fake served in a background task on `127.0.0.1`; dropping it stops it.
#[derive(Debug)]
pub(crate) struct Background {
    addr: std::net::SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<io::Result<()>>,
}

impl Background {
    /// Binds `127.0.0.1:0` and serves `router` in a spawned task.
    pub(crate) async fn start(router: Router) -> io::Result<Self> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(run(listener, router, async {
            let _ = stopped.await;
        }));
        Ok(Self { addr, stop: Some(stop), task })
    }

    /// The bound address.
    pub(crate) fn addr(&self) -> std::net::SocketAddr {
        self.addr
    }

    /// Stops serving and waits for the server task.
    pub(crate) async fn shutdown(mut self) -> io::Result<()> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        match (&mut self.task).await {
            Ok(result) => result,
            Err(join) => Err(io::Error::other(join.to_string())),
        }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// A fake's state with the background server over it: what [`super::FakeIm`] and
/// [`crate::fake_wallet::FakeWallet`] hold, so that starting, addressing and stopping a fake
/// are written once.
#[derive(Debug)]
pub(crate) struct Served<S> {
    /// The state the routes serve, shared with the handle's inspection methods.
    pub(crate) state: Arc<S>,
    server: Background,
}

impl<S> Served<S> {
    /// Binds `127.0.0.1:0` and serves `app` over `state` in a spawned task.
    pub(crate) async fn start(state: S, app: impl FnOnce(Arc<S>) -> Router) -> io::Result<Self> {
        let state = Arc::new(state);
        let server = Background::start(app(state.clone())).await?;
        Ok(Self { state, server })
    }

    /// `http://127.0.0.1:<port>`.
    pub(crate) fn base_url(&self) -> String {
        format!("http://{}", self.server.addr())
    }

    /// The bound address.
    pub(crate) fn addr(&self) -> std::net::SocketAddr {
        self.server.addr()
    }

    /// Stops serving and waits for the server task.
    pub(crate) async fn shutdown(self) -> io::Result<()> {
        self.server.shutdown().await
    }
}

/// The started fake, or a panic naming `what` could not bind: the fakes' `start` is for tests,
/// where a missing loopback port is a broken machine, not a case to handle.
pub(crate) fn started_or_panic<T>(started: io::Result<T>, what: &str) -> T {
    match started {
        Ok(fake) => fake,
        Err(error) => panic!("{what} cannot bind a loopback port: {error}"),
    }
}
