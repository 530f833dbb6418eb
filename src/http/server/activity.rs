//! When an HTTP/2 connection of the gRPC listener has nothing to do: [`track`] wraps the
//! connection's service to count its open calls (a call is open from its headers until its
//! answer's body is done or dropped), and [`Activity::expired`] resolves once the connection
//! should be closed:
//! - no call started within the header-read timeout of connecting (a client that connects and
//!   sends nothing, or trickles its first headers);
//! - no call open for the idle timeout (`http.idle_timeout`), however many keep-alive pings the
//!   client answers.
//!
//! The accept loop then closes the connection gracefully (GOAWAY): no call is ever cut.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use axum::http::{Request, Response};
use hyper::body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;
use tokio::sync::watch;
use tower::Service;

/// What a connection has done so far.
#[derive(Debug, Clone, Copy, Default)]
struct Calls {
    /// Calls started.
    started: u64,
    /// Calls not finished yet.
    open: usize,
}

/// The calls of one connection, as [`Tracked`] counts them.
#[derive(Debug)]
pub struct Activity(watch::Receiver<Calls>);

/// Why a connection is closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expired {
    /// No call started within the header-read timeout of connecting.
    NoCall,
    /// No call was open for the idle timeout.
    Idle,
}

impl Activity {
    /// Resolves once no call started within `header_read` of now, or once no call has been
    /// open for `idle`.
    pub async fn expired(mut self, header_read: Duration, idle: Duration) -> Expired {
        if tokio::time::timeout(header_read, self.0.wait_for(|c| c.started > 0)).await.is_err() {
            return Expired::NoCall;
        }
        loop {
            // The connection is gone when its service is: nothing to expire.
            if self.0.wait_for(|c| c.open == 0).await.is_err() {
                return std::future::pending().await;
            }
            let seen = self.0.borrow().started;
            if tokio::time::timeout(idle, self.0.wait_for(|c| c.started != seen)).await.is_err() {
                return Expired::Idle;
            }
        }
    }
}

/// `service` counting its calls, and what the counts say.
pub fn track<S>(service: S) -> (Tracked<S>, Activity) {
    let (calls, activity) = watch::channel(Calls::default());
    (Tracked { inner: service, calls: Arc::new(calls) }, Activity(activity))
}

/// A service counting its open calls; see the module docs.
#[derive(Debug, Clone)]
pub struct Tracked<S> {
    inner: S,
    calls: Arc<watch::Sender<Calls>>,
}

impl<S, B, ResBody> Service<Request<B>> for Tracked<S>
where
    S: Service<Request<B>, Response = Response<ResBody>>,
{
    type Response = Response<TrackedBody<ResBody>>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        self.calls.send_modify(|c| {
            c.started += 1;
            c.open += 1;
        });
        let open = OpenCall(self.calls.clone());
        ResponseFuture { inner: self.inner.call(request), open: Some(open) }
    }
}

/// One open call: closed when dropped.
#[derive(Debug)]
struct OpenCall(Arc<watch::Sender<Calls>>);

impl Drop for OpenCall {
    fn drop(&mut self) {
        self.0.send_modify(|c| c.open -= 1);
    }
}

pin_project! {
    /// The answer of [`Tracked`]: the inner answer, whose body keeps the call open.
    pub struct ResponseFuture<F> {
        #[pin]
        inner: F,
        open: Option<OpenCall>,
    }
}

impl<F, ResBody, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<Response<ResBody>, E>>,
{
    type Output = Result<Response<TrackedBody<ResBody>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let response = ready!(this.inner.poll(cx))?;
        let open = this.open.take();
        Poll::Ready(Ok(response.map(|inner| TrackedBody { inner, _open: open })))
    }
}

pin_project! {
    /// An answer's body, keeping its call open until it is done or dropped.
    pub struct TrackedBody<B> {
        #[pin]
        inner: B,
        _open: Option<OpenCall>,
    }
}

impl<B: Body> Body for TrackedBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        self.project().inner.poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use tower::ServiceExt;

    use super::*;

    /// What a service answers in these tests.
    type Answered = std::future::Ready<Result<Response<String>, std::convert::Infallible>>;

    fn answer() -> tower::util::ServiceFn<impl FnMut(Request<()>) -> Answered> {
        tower::service_fn(|_| std::future::ready(Ok(Response::new("ok".to_owned()))))
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_without_a_first_call_expires_after_the_header_read_timeout() {
        let (_service, activity) = track(answer());
        let started = tokio::time::Instant::now();
        let expired = activity.expired(Duration::from_secs(10), Duration::from_secs(30)).await;
        assert_eq!((expired, started.elapsed()), (Expired::NoCall, Duration::from_secs(10)));
    }

    #[tokio::test(start_paused = true)]
    async fn an_open_call_keeps_the_connection_and_idleness_counts_from_its_end() {
        let (mut service, activity) = track(answer());
        let expiry = tokio::spawn(activity.expired(Duration::from_secs(10), Duration::from_secs(30)));
        tokio::time::sleep(Duration::from_secs(5)).await;
        // The service lives as long as its connection.
        let response = service.ready().await.unwrap().call(Request::new(())).await.unwrap();
        // The answer's body is held for a minute: the call stays open.
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert!(!expiry.is_finished());
        let ended = tokio::time::Instant::now();
        drop(response);
        assert_eq!(expiry.await.unwrap(), Expired::Idle);
        assert_eq!(ended.elapsed(), Duration::from_secs(30));
    }
}
