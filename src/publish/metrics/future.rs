//! [`ResponseFuture`] of [`PublishMetrics`](super::PublishMetrics): polls the inner future and
//! records the publish metrics once, when it completes.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use metrics::{counter, histogram};
use pin_project_lite::pin_project;
use tokio::time::Instant;

use crate::publish::{BoxError, ErrorClass, Outcome, Path, classify};
use crate::telemetry::names::{
    IM_CALLS_TOTAL, IM_EVENTS_PER_CALL, LABEL_CLASS, LABEL_EVENT_TYPE, LABEL_PATH, LABEL_RESULT,
    PUBLISH_FAILURE_TOTAL, PUBLISH_LATENCY_SECONDS, PUBLISH_SUCCESS_TOTAL,
};

pin_project! {
    /// Response future of [`PublishMetrics`](super::PublishMetrics).
    #[derive(Debug)]
    pub struct ResponseFuture<F> {
        #[pin]
        inner: F,
        path: Path,
        event_types: Vec<&'static str>,
        start: Instant,
    }
}

impl<F> ResponseFuture<F> {
    pub(super) fn new(inner: F, path: Path, event_types: Vec<&'static str>, start: Instant) -> Self {
        Self { inner, path, event_types, start }
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
        let class = result.as_ref().err().map(|error| classify(error.as_ref()));
        for &event_type in this.event_types.iter() {
            match (&result, class) {
                (Ok(outcome), _) => counter!(
                    PUBLISH_SUCCESS_TOTAL,
                    LABEL_PATH => path,
                    LABEL_EVENT_TYPE => event_type,
                    LABEL_RESULT => outcome.as_str(),
                )
                .increment(1),
                (Err(_), class) => counter!(
                    PUBLISH_FAILURE_TOTAL,
                    LABEL_PATH => path,
                    LABEL_EVENT_TYPE => event_type,
                    LABEL_CLASS => class.unwrap_or(ErrorClass::Transient).as_str(),
                )
                .increment(1),
            }
        }
        let first_type = this.event_types.first().copied().unwrap_or("none");
        histogram!(
            PUBLISH_LATENCY_SECONDS,
            LABEL_PATH => path,
            LABEL_EVENT_TYPE => first_type,
        )
        .record(this.start.elapsed().as_secs_f64());
        // A call of the receiver: not a message the filter answered, nor one the rate limit
        // held back, and only on the IM paths (the consumers count their own deliveries).
        let called = !matches!(result, Ok(Outcome::Skipped)) && class != Some(ErrorClass::Throttled);
        if called && matches!(this.path, Path::Sync | Path::Worker) {
            let result = class.map_or("delivered", ErrorClass::as_str);
            counter!(IM_CALLS_TOTAL, LABEL_PATH => path, LABEL_RESULT => result).increment(1);
            histogram!(IM_EVENTS_PER_CALL, LABEL_PATH => path).record(this.event_types.len() as f64);
        }
        Poll::Ready(result)
    }
}
