//! The assembled publish stack: erase its concrete type into a [`Publisher`]. The one
//! composition every test and benchmark uses is `app::im_stack` (it configures the filter with
//! the domain's IM skip list, which this module does not know).
//!
//! `main.rs` writes the production stack out with its own `ServiceBuilder`, outer to inner:
//! [`TraceLayer`](super::trace::TraceLayer) → [`MetricsLayer`](super::metrics::MetricsLayer) →
//! [`EventFilterLayer`](super::filter::EventFilterLayer) → `RateLimitLayer` (IM only) →
//! `tower::timeout::TimeoutLayer` → leaf (Tencent IM or [`LogSink`](super::log_sink::LogSink)).
//! `app::im_stack` builds exactly that order; the process test `tests/it/delivery/main_stack.rs`
//! runs the real binary to prove `main.rs` composes it the same way (filter skips, timeouts
//! counted, metrics by path). The tests beside this module check how the layers work together.

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
