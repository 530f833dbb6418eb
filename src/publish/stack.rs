//! The assembled publish stack: erase its concrete type into a [`Publisher`], and
//! [`im_stack`], the one composition every test and benchmark uses.
//!
//! `main.rs` writes the production stack out with its own `ServiceBuilder`, outer to inner:
//! [`TraceLayer`] → [`MetricsLayer`] → [`EventFilterLayer`] → [`RateLimitLayer`] (IM only) →
//! `tower::timeout::TimeoutLayer` → leaf (Tencent IM or [`LogSink`](super::log_sink::LogSink)).
//! [`im_stack`] builds exactly that order; the process test `tests/it/delivery/main_stack.rs`
//! runs the real binary to prove `main.rs` composes it the same way (filter skips, timeouts
//! counted, metrics by path). The tests beside this module check how the layers work together.

use std::time::Duration;

use tower::{Service, ServiceBuilder, ServiceExt};

use super::filter::EventFilterLayer;
use super::metrics::MetricsLayer;
use super::rate_limit::RateLimitLayer;
use super::trace::TraceLayer;
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

/// The IM publish stack in production order around `leaf`: Trace → Metrics → EventFilter (the
/// IM skip list) → `rate_limit` (none: no limiter, as with the log sink) → Timeout
/// (`publish_timeout`) → `leaf`. For tests and benchmarks; `main.rs` spells the same stack out.
pub fn im_stack<L>(leaf: L, rate_limit: Option<RateLimitLayer>, publish_timeout: Duration) -> Publisher
where
    L: Service<Message, Response = Outcome> + Clone + Send + Sync + 'static,
    L::Error: Into<BoxError> + 'static,
    L::Future: Send + 'static,
{
    into_publisher(
        ServiceBuilder::new()
            .layer(TraceLayer::new())
            .layer(MetricsLayer::new())
            .layer(EventFilterLayer::im())
            .option_layer(rate_limit)
            .timeout(publish_timeout)
            .service(leaf),
    )
}

#[cfg(test)]
mod tests;
