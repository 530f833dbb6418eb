//! [`ResponseFuture`] of [`Trace`](super::Trace): polls the inner future inside the publish
//! span and records how the publish ended.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use pin_project_lite::pin_project;
use tracing::Span;

use crate::publish::{BoxError, Outcome, classify};

pin_project! {
    /// Response future of [`Trace`](super::Trace).
    #[derive(Debug)]
    pub struct ResponseFuture<F> {
        #[pin]
        inner: F,
        span: Span,
    }
}

impl<F> ResponseFuture<F> {
    pub(super) fn new(inner: F, span: Span) -> Self {
        Self { inner, span }
    }
}

impl<F, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<Outcome, E>>,
    E: Into<BoxError>,
{
    type Output = Result<Outcome, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let _entered = this.span.enter();
        let result = ready!(this.inner.poll(cx)).map_err(Into::into);
        match &result {
            Ok(outcome) => {
                this.span.record("outcome", outcome.as_str());
                tracing::debug!("Published");
            }
            Err(error) => {
                let class = classify(error.as_ref()).as_str();
                this.span.record("outcome", "failed");
                this.span.record("error_class", class);
                tracing::warn!(%error, error_class = class, "Publish failed");
            }
        }
        Poll::Ready(result)
    }
}
