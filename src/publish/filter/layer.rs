//! [`EventFilterLayer`]: holds the set of event types to skip, wraps a service in
//! [`EventFilter`].

use std::sync::Arc;

use tower::Layer;

use super::EventFilter;

/// Event types that go through the publish stack but never reach Tencent IM (SPEC §2): they are
/// answered with [`Outcome::Skipped`](crate::publish::Outcome::Skipped) and so marked delivered.
pub const IM_SKIPPED_EVENT_TYPES: [&str; 3] = ["RoomCreated", "RoomHeatChanged", "RoomRankChanged"];

/// A [`Layer`] that wraps services in [`EventFilter`] middleware.
///
/// Holds only configuration: the event types answered with `Skipped`. Cloning it is cheap (the
/// set is shared).
#[derive(Clone, Debug)]
pub struct EventFilterLayer {
    skip: Arc<[&'static str]>,
}

impl EventFilterLayer {
    /// A layer that answers the given event types with `Skipped` and forwards all others.
    pub fn skip<I>(event_types: I) -> Self
    where
        I: IntoIterator<Item = &'static str>,
    {
        Self { skip: event_types.into_iter().collect() }
    }

    /// The layer for the Tencent IM sink: skips [`IM_SKIPPED_EVENT_TYPES`].
    pub fn im() -> Self {
        Self::skip(IM_SKIPPED_EVENT_TYPES)
    }

    /// The event types this layer answers with `Skipped`.
    pub fn skipped_types(&self) -> &[&'static str] {
        &self.skip
    }
}

impl<S> Layer<S> for EventFilterLayer {
    type Service = EventFilter<S>;

    fn layer(&self, inner: S) -> Self::Service {
        EventFilter::new(inner, Arc::clone(&self.skip))
    }
}
