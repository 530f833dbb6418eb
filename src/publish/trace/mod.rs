//! Publish tracing: one `tracing` span per publish, modelled on `tower-http`'s trace layer.
//!
//! The outermost layer of the publish stack, so its span wraps everything below (metrics,
//! filter, timeout, the leaf) and every log line emitted there carries the event's identity:
//!
//! ```text
//! publish{event_id, event_type, room_id, path, outcome, error_class, trace_id, span_id}
//! ```
//!
//! When traces are exported the span joins its events' traces.
//!
//! The span is entered while the inner service is called and whenever its future is polled.
//! On completion it records `outcome` (`delivered` | `skipped` | `failed`) and, on failure,
//! `error_class` (see [`classify`](crate::publish::classify())) and logs `Publish failed` at
//! `warn` with `%error`. Only the error's text is logged, never the message body; leaves keep
//! their error texts short and free of secrets.

mod future;
mod layer;

use std::task::{Context, Poll};

use tower::Service;
use tracing::field::Empty;

pub use self::future::ResponseFuture;
pub use self::layer::TraceLayer;
use crate::publish::{BoxError, Message, Outcome, Path};
use crate::telemetry::traces;

/// Wraps each publish through `S` in a `publish` span.
#[derive(Clone, Debug)]
pub struct Trace<S> {
    inner: S,
}

impl<S> Trace<S> {
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

impl<S> Service<Message> for Trace<S>
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
        let span = tracing::info_span!(
            "publish",
            event_id = %message.event_id(),
            event_type = message.event_type(),
            events = message.events.len(),
            room_id = %message.group,
            path = message.path.as_str(),
            outcome = Empty,
            error_class = Empty,
            trace_id = Empty,
            span_id = Empty,
        );
        if traces::on() {
            relate(&span, &message);
        }
        let inner = {
            let _entered = span.enter();
            self.inner.call(message)
        };
        ResponseFuture::new(inner, span)
    }
}

/// Places a publish in its events' traces (SPEC §13.4): the command path's message is a child
/// of its first event's `lane` span, linked to the others'; a redelivery (the worker, a
/// consumer) starts a trace of its own, linked to the span of each command it carries.
fn relate(span: &tracing::Span, message: &Message) {
    let contexts = message.events.iter().filter_map(|e| e.trace.as_ref());
    let parent =
        if message.path == Path::Sync { message.events.first().and_then(|e| e.trace.as_ref()) } else { None };
    if let Some(parent) = parent {
        traces::set_parent(span, parent);
    }
    traces::link(span, contexts.filter(|c| parent.is_none_or(|p| p.span_id() != c.span_id())));
    traces::record_ids(span);
}

#[cfg(test)]
mod tests;
