//! The fakes' own accept loop (the fake IM's, shared with the fake wallet). `axum::serve`
//! cannot close one connection on request, and the "connection dropped without a response"
//! fault needs exactly that: each connection gets a `DropConnection` handle in its requests'
//! extensions; firing it drops the connection. A stop closes every open connection at once,
//! so a request held by a delay fault never holds a shutdown.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;
use serde::Serialize;
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
async fn run(listener: TcpListener, router: Router, shutdown: impl Future<Output = ()>) -> io::Result<()> {
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

/// A fake's state: built from its options, served by its routes.
pub trait FakeApp: Sized + Send + Sync + 'static {
    /// What the fake is started with.
    type Options;
    /// The fake's name, in the panic of a [`Fake::start`] that cannot bind.
    const NAME: &'static str;
    /// A fresh state.
    fn new(options: Self::Options) -> Self;
    /// The routes over `state` (with [`controls`] among them).
    fn app(state: Arc<Self>) -> Router;
}

/// The controls every fake has over its `state`: `POST /fake/reset` (`clear`: forget what it
/// recorded, its faults and counters; 204) and `GET /fake/stats` (`stats`: its counters).
pub fn controls<S, T>(state: Arc<S>, clear: fn(&S), stats: fn(&S) -> T) -> Router
where
    S: Send + Sync + 'static,
    T: Serialize + 'static,
{
    let reset = async move |State(state): State<Arc<S>>| {
        clear(&state);
        StatusCode::NO_CONTENT
    };
    let stats = async move |State(state): State<Arc<S>>| Json(stats(&state));
    Router::new().route("/fake/reset", post(reset)).route("/fake/stats", get(stats)).with_state(state)
}

/// A fake running in the background on `127.0.0.1`, for tests ([`super::FakeIm`],
/// [`crate::fake_wallet::FakeWallet`]): starting, addressing and stopping a fake are written
/// once here, and it dereferences to the fake's state, whose methods inspect and steer it.
/// Dropping it stops it.
#[derive(Debug)]
pub struct Fake<S> {
    state: Arc<S>,
    server: Background,
}

impl<S: FakeApp> Fake<S> {
    /// Binds `127.0.0.1:0` and serves in a spawned task.
    ///
    /// # Panics
    /// If no loopback port can be bound; use [`Fake::try_start`] to get the error instead. The
    /// fakes are for tests, where a missing loopback port is a broken machine, not a case to
    /// handle.
    pub async fn start(options: S::Options) -> Self {
        match Self::try_start(options).await {
            Ok(fake) => fake,
            Err(error) => panic!("{} cannot bind a loopback port: {error}", S::NAME),
        }
    }

    /// Like [`Fake::start`], returning the bind error.
    pub async fn try_start(options: S::Options) -> io::Result<Self> {
        let state = Arc::new(S::new(options));
        let server = Background::start(S::app(state.clone())).await?;
        Ok(Self { state, server })
    }
}

impl<S> Fake<S> {
    /// `http://127.0.0.1:<port>`, to use as the fake's base URL.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.server.addr())
    }

    /// The bound address.
    pub fn addr(&self) -> std::net::SocketAddr {
        self.server.addr()
    }

    /// Stops serving and waits for the server task.
    pub async fn shutdown(self) -> io::Result<()> {
        self.server.shutdown().await
    }
}

impl<S> std::ops::Deref for Fake<S> {
    type Target = S;

    fn deref(&self) -> &S {
        &self.state
    }
}

/// Serves fake `S` on `listener` until `shutdown` completes; open connections are then closed.
pub async fn serve<S: FakeApp>(
    listener: TcpListener,
    options: S::Options,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    run(listener, S::app(Arc::new(S::new(options))), shutdown).await
}
