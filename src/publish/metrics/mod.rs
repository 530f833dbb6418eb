//! Publish metrics: counts every event of a publish once when it completes, the call itself,
//! and its latency.
//!
//! Sits right below tracing in the publish stack, above the filter, so skipped events are
//! counted too (`result="skipped"`) and the latency covers the timeout and the leaf. Records:
//!
//! - `room_outbox_publish_success_total{path,event_type,result}`, `result` = delivered|skipped;
//! - `room_outbox_publish_failure_total{path,event_type,class}`, `class` from
//!   [`classify`](crate::publish::classify());
//! - `room_outbox_publish_latency_seconds{path,event_type}`, success or failure alike, once per
//!   message (`event_type` of its first event);
//! - on the IM paths (`sync`, `worker`), for a message that reached the receiver (not skipped,
//!   not throttled): `room_im_calls_total{path,result}` (`result` = delivered or the error
//!   class) and `room_im_events_per_call{path}`, the events it carried.
//!
//! Every label value is bounded, so [`register_zero`] exports each series at 0 from startup. Time comes from `tokio::time::Instant`, so paused-time tests
//! are exact. A publish whose future is dropped before completing (its caller went away) is
//! not counted.

mod future;
mod layer;

use std::task::{Context, Poll};

use metrics::{counter, histogram};
use tokio::time::Instant;
use tower::Service;

pub use self::future::ResponseFuture;
pub use self::layer::MetricsLayer;
use crate::publish::{BoxError, ErrorClass, Message, Outcome, Path};
use crate::telemetry::names::{
    IM_CALLS_TOTAL, IM_EVENTS_PER_CALL, IM_QUARANTINED_EVENTS_TOTAL, IM_SENDER_QUARANTINES_TOTAL,
    LABEL_CLASS, LABEL_EVENT_TYPE, LABEL_PATH, LABEL_RESULT, PUBLISH_FAILURE_TOTAL, PUBLISH_LATENCY_SECONDS,
    PUBLISH_SUCCESS_TOTAL,
};

/// Exports every series this layer records for `paths` and `event_types` at 0 (histograms
/// empty), before the first publish: a panel then shows 0, not "No data", and an alert on
/// `rate()` or `increase()` sees a series that did not move rather than none. On the IM paths
/// the IM call series too, for every result a call can have (delivered, or the class of its
/// failure; a throttled message never calls), and the quarantine's counters
/// ([`crate::delivery::quarantine`]).
pub fn register_zero(paths: &[Path], event_types: &[&'static str]) {
    for &path in paths {
        let path_label = path.as_str();
        for &event_type in event_types {
            for outcome in Outcome::ALL {
                counter!(PUBLISH_SUCCESS_TOTAL, LABEL_PATH => path_label, LABEL_EVENT_TYPE => event_type, LABEL_RESULT => outcome.as_str()).increment(0);
            }
            for class in ErrorClass::ALL {
                counter!(PUBLISH_FAILURE_TOTAL, LABEL_PATH => path_label, LABEL_EVENT_TYPE => event_type, LABEL_CLASS => class.as_str()).increment(0);
            }
            let _ =
                histogram!(PUBLISH_LATENCY_SECONDS, LABEL_PATH => path_label, LABEL_EVENT_TYPE => event_type);
        }
        if path.calls_im() {
            let failed =
                ErrorClass::ALL.into_iter().filter(|c| *c != ErrorClass::Throttled).map(ErrorClass::as_str);
            for result in std::iter::once("delivered").chain(failed) {
                counter!(IM_CALLS_TOTAL, LABEL_PATH => path_label, LABEL_RESULT => result).increment(0);
            }
            let _ = histogram!(IM_EVENTS_PER_CALL, LABEL_PATH => path_label);
            counter!(IM_QUARANTINED_EVENTS_TOTAL, LABEL_PATH => path_label).increment(0);
            counter!(IM_SENDER_QUARANTINES_TOTAL, LABEL_PATH => path_label).increment(0);
        }
    }
}

/// Records the publish counters and latency histogram around `S`.
#[derive(Clone, Debug)]
pub struct PublishMetrics<S> {
    inner: S,
}

impl<S> PublishMetrics<S> {
    /// Wraps `inner`.
    pub fn new(inner: S) -> Self {
        Self { inner }
    }

    /// The wrapped service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// Unwraps the inner service.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S> Service<Message> for PublishMetrics<S>
where
    S: Service<Message, Response = Outcome>,
    S::Error: Into<BoxError>,
{
    type Response = Outcome;
    type Error = BoxError;
    type Future = ResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, message: Message) -> Self::Future {
        // Started before the inner call: work a leaf does synchronously in `call` counts too.
        let start = Instant::now();
        let (path, event_types) = (message.path, message.events.iter().map(|e| e.event_type).collect());
        ResponseFuture::new(self.inner.call(message), path, event_types, start)
    }
}

#[cfg(test)]
mod tests;
