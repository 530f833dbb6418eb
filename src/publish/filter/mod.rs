//! Event filter: answers some event types with [`Outcome::Skipped`] without calling the inner
//! service; forwards every other message unchanged. An event carrying an IM group admin call
//! ([`crate::publish::AdminCall`]) is never skipped: the call must reach the leaf.
//!
//! In the publish stack it sits below tracing and metrics (so skipped events are still traced
//! and counted as `result="skipped"`) and above the timeout and the leaf, so the event types
//! the domain says do not reach IM (`EventType::reaches_im`) never reach Tencent IM (SPEC §2). `tower::filter`
//! can only reject a request; this layer answers it with success instead, modelled on
//! `tower::load_shed`.
//!
//! # Readiness
//!
//! `poll_ready` only forwards to the inner service. A skipped message therefore waits for the
//! inner service to be ready, but does not consume that readiness: tower's contract is that a
//! service which returned `Ready` stays reserved for the next `call`, so the reservation simply
//! carries over to the next forwarded message. The alternative (always report ready, as
//! `load_shed` does, and drive the inner readiness inside the response future) would need a
//! clone of the inner service per call; the leaves we wrap (timeout around the IM client or the
//! log sink) are always ready, so the simple rule costs nothing.

mod future;
mod layer;

use std::sync::Arc;
use std::task::{Context, Poll};

use tower::Service;

pub use self::future::ResponseFuture;
pub use self::layer::EventFilterLayer;
use crate::publish::{BoxError, Event, Message, Outcome};

/// Answers messages whose event type is in the skip set with [`Outcome::Skipped`]; forwards the
/// rest to `S`.
#[derive(Clone, Debug)]
pub struct EventFilter<S> {
    inner: S,
    skip: Arc<[&'static str]>,
}

impl<S> EventFilter<S> {
    /// Wraps `inner`, skipping the given event types.
    pub fn new(inner: S, skip: Arc<[&'static str]>) -> Self {
        Self { inner, skip }
    }

    /// Whether a message of this event type is answered without calling the inner service.
    pub fn skips(&self, event_type: &str) -> bool {
        self.skip.contains(&event_type)
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

impl<S> Service<Message> for EventFilter<S>
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

    /// A message whose events are all skipped is answered [`Outcome::Skipped`]; any other one
    /// is forwarded without its skipped events (the publishers never mix them into a pack, so
    /// this only keeps a stray one from reaching IM). An event carrying an admin call is never
    /// skipped, whatever its type (a `RoomCreated` carries the group's creation, SPEC §14.2).
    fn call(&mut self, mut message: Message) -> Self::Future {
        let skip = &self.skip;
        let skipped = |e: &Event| e.admin.is_none() && skip.contains(&e.event_type);
        if message.events.iter().all(skipped) {
            ResponseFuture::skipped()
        } else {
            message.events.retain(|e| !skipped(e));
            ResponseFuture::called(self.inner.call(message))
        }
    }
}

#[cfg(test)]
mod tests;
