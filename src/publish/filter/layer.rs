//! [`EventFilterLayer`]: holds the set of event types to skip, wraps a service in
//! [`EventFilter`].

use std::sync::Arc;

use tower::Layer;

use super::EventFilter;

/// A [`Layer`] that wraps services in [`EventFilter`] middleware.
///
/// Holds only configuration: the event types answered with `Skipped`. Cloning it is cheap (the
/// set is shared).
#[derive(Clone, Debug)]
pub struct EventFilterLayer {
    skip: Arc<[&'static str]>,
}

impl EventFilterLayer {
    /// A layer that answers the given event types with `Skipped` and forwards all others. The
    /// IM stack skips the types that do not reach IM (`EventType::im_skipped` of the domain,
    /// which `main.rs` hands in: publish knows no event types).
    pub fn skip<I>(event_types: I) -> Self
    where
        I: IntoIterator<Item = &'static str>,
    {
        Self { skip: event_types.into_iter().collect() }
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
