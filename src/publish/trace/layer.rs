//! [`TraceLayer`]: wraps a service in [`Trace`].

use tower::Layer;

use super::Trace;

/// A [`Layer`] that wraps services in [`Trace`] middleware.
///
/// It has no configuration: the span shape is fixed so every sink's logs read alike.
#[derive(Clone, Debug, Default)]
pub struct TraceLayer {
    _priv: (),
}

impl TraceLayer {
    /// Creates the layer.
    pub fn new() -> Self {
        Self::default()
    }
}

impl<S> Layer<S> for TraceLayer {
    type Service = Trace<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Trace::new(inner)
    }
}
