//! [`MetricsLayer`]: wraps a service in [`PublishMetrics`].

use tower::Layer;

use super::PublishMetrics;

/// A [`Layer`] that wraps services in [`PublishMetrics`] middleware.
///
/// It has no configuration: metric names and label keys come from
/// [`telemetry::names`](crate::telemetry::names), and metrics go to the installed recorder.
#[derive(Clone, Debug, Default)]
pub struct MetricsLayer {
    _priv: (),
}

impl MetricsLayer {
    /// Creates the layer.
    pub fn new() -> Self {
        Self::default()
    }
}

impl<S> Layer<S> for MetricsLayer {
    type Service = PublishMetrics<S>;

    fn layer(&self, inner: S) -> Self::Service {
        PublishMetrics::new(inner)
    }
}
