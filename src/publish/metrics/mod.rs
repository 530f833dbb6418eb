//! Publish metrics: counts every event of a publish once when it completes, the call itself,
//! and its latency.
//!
//! Sits right below tracing in the publish stack, above the filter, so skipped events are
//! counted too (`result="skipped"`) and the latency covers the timeout and the leaf. Records:
//!
//! - `room_outbox_publish_success_total{path,event_type,result}`, `result` = delivered|skipped;
//! - `room_outbox_publish_failure_total{path,event_type,class}`, `class` from
//!   [`classify`](crate::publish::classify);
//! - `room_outbox_publish_latency_seconds{path,event_type}`, success or failure alike, once per
//!   message (`event_type` of its first event);
//! - on the IM paths (`sync`, `worker`), for a message that reached the receiver (not skipped,
//!   not throttled): `room_im_calls_total{path,result}` (`result` = delivered or the error
//!   class) and `room_im_events_per_call{path}`, the events it carried.
//!
//! Events a [`Refill`] adds to a message while it waits for its permit count with it.
//!
//! Every label value is bounded. Time comes from `tokio::time::Instant`, so paused-time tests
//! are exact. A publish whose future is dropped before completing (its caller went away) is
//! not counted.

mod future;
mod layer;

use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use tokio::time::Instant;
use tower::Service;

pub use self::future::ResponseFuture;
pub use self::layer::MetricsLayer;
use crate::publish::{BoxError, Message, Outcome, Refill};

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

    fn call(&mut self, mut message: Message) -> Self::Future {
        // Started before the inner call: work a leaf does synchronously in `call` counts too.
        let start = Instant::now();
        let (path, event_types) = (message.path, message.events.iter().map(|e| e.event_type).collect());
        // Events a refill adds below count with the message's own.
        let added = message.refill.take().map(|refill| {
            let added = Arc::new(Mutex::new(Vec::new()));
            let record = Arc::clone(&added);
            message.refill = Some(Refill::new(move |events| {
                let before = events.len();
                refill.apply(events);
                let mut record = record.lock().unwrap_or_else(|e| e.into_inner());
                record.extend(events.iter().skip(before).map(|e| e.event_type));
            }));
            added
        });
        ResponseFuture::new(self.inner.call(message), path, event_types, added, start)
    }
}

#[cfg(test)]
mod tests;
