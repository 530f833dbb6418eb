//! [`ResponseFuture`] of [`PublishMetrics`](super::PublishMetrics): polls the inner future and
//! records the publish metrics once, when it completes.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use metrics::{counter, histogram};
use pin_project_lite::pin_project;
use tokio::time::Instant;

use crate::publish::{BoxError, Outcome, Path, classify};
use crate::telemetry::names::{
    LABEL_CLASS, LABEL_EVENT_TYPE, LABEL_PATH, LABEL_RESULT, PUBLISH_FAILURE_TOTAL, PUBLISH_LATENCY_SECONDS,
    PUBLISH_SUCCESS_TOTAL,
};

pin_project! {
    /// Response future of [`PublishMetrics`](super::PublishMetrics).
    #[derive(Debug)]
    pub struct ResponseFuture<F> {
        #[pin]
        inner: F,
        path: Path,
        event_type: &'static str,
        start: Instant,
    }
}

impl<F> ResponseFuture<F> {
    pub(super) fn new(inner: F, path: Path, event_type: &'static str, start: Instant) -> Self {
        Self { inner, path, event_type, start }
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
        let result = ready!(this.inner.poll(cx)).map_err(Into::into);
        let path = this.path.as_str();
        let event_type = *this.event_type;
        match &result {
            Ok(outcome) => counter!(
                PUBLISH_SUCCESS_TOTAL,
                LABEL_PATH => path,
                LABEL_EVENT_TYPE => event_type,
                LABEL_RESULT => outcome.as_str(),
            )
            .increment(1),
            Err(error) => counter!(
                PUBLISH_FAILURE_TOTAL,
                LABEL_PATH => path,
                LABEL_EVENT_TYPE => event_type,
                LABEL_CLASS => classify(error.as_ref()).as_str(),
            )
            .increment(1),
        }
        histogram!(
            PUBLISH_LATENCY_SECONDS,
            LABEL_PATH => path,
            LABEL_EVENT_TYPE => event_type,
        )
        .record(this.start.elapsed().as_secs_f64());
        Poll::Ready(result)
    }
}
