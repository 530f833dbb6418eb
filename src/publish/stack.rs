//! Helpers for the assembled publish stack: erase its concrete type into a [`Publisher`].
//!
//! The stack itself is composed in `main.rs`, outer to inner:
//! [`TraceLayer`](super::trace::TraceLayer) → [`MetricsLayer`](super::metrics::MetricsLayer) →
//! [`EventFilterLayer`](super::filter::EventFilterLayer) → `tower::timeout::TimeoutLayer` →
//! leaf (Tencent IM or [`LogSink`](super::log_sink::LogSink)). The tests beside this module
//! build exactly that order and check how the layers work together.

use tower::{Service, ServiceExt};

use super::{BoxError, Message, Outcome, Publisher};

/// Erases the type of a publish stack (or a bare leaf) into the shared, cloneable
/// [`Publisher`] handed to the room service and the outbox worker.
pub fn into_publisher<S>(svc: S) -> Publisher
where
    S: Service<Message, Response = Outcome> + Clone + Send + Sync + 'static,
    S::Error: Into<BoxError> + 'static,
    S::Future: Send + 'static,
{
    Publisher::new(svc.map_err(Into::<BoxError>::into))
}

#[cfg(test)]
mod tests;
