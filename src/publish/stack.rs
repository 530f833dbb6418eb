//! The publish stack's layers, in the one order every stack of the service uses — the IM
//! stack `main.rs` serves with (through `app::publisher`), the stacks tests and benchmarks build
//! around other leaves (`app::im_stack`), and each event consumer's — and the erasure of an
//! assembled stack into a [`Publisher`].
//!
//! ```text
//! TraceLayer → MetricsLayer → EventFilterLayer → [rate limit] → TimeoutLayer → leaf
//! ```
//!
//! The stacks differ only in what the layers are configured with (see [`PublishLayers`]). The
//! tests beside this module check how the layers work together.

use std::time::Duration;

use tower::timeout::Timeout;
use tower::util::Either;
use tower::{Layer, Service, ServiceBuilder, ServiceExt};

use super::filter::{EventFilter, EventFilterLayer};
use super::metrics::{MetricsLayer, PublishMetrics};
use super::trace::{Trace, TraceLayer};
use super::{BoxError, Message, Outcome, Publisher};

/// The layers of a publish stack, outermost first; `layer(leaf)` is the stack:
///
/// 1. [`TraceLayer`]: one span per publish covers everything below, the filter included.
/// 2. [`MetricsLayer`]: counts every outcome once, skipped and timed-out publishes included.
/// 3. [`EventFilterLayer`] (`skip`): the event types this sink does not take are answered
///    `Skipped` at once, so they never take a rate-limit permit nor reach the timeout (for IM:
///    RoomCreated, RoomHeatChanged, RoomRankChanged, from the domain).
/// 4. `rate_limit`: a consumer's events per second (`tower`'s), waited for outside the timeout
///    below. None in the IM stack: Tencent's limits are the delivery core's permits
///    ([`crate::delivery::permits`]), taken before a message is built.
/// 5. `timeout`: bounds one call of the leaf; the error is classified as a timeout above.
#[derive(Clone, Debug)]
pub struct PublishLayers<R> {
    /// The event types answered `Skipped`.
    pub skip: EventFilterLayer,
    /// The rate limit, if any.
    pub rate_limit: Option<R>,
    /// Bounds one call of the leaf.
    pub timeout: Duration,
}

impl<S, R> Layer<S> for PublishLayers<R>
where
    R: Layer<Timeout<S>> + Clone,
{
    type Service = Trace<PublishMetrics<EventFilter<Either<R::Service, Timeout<S>>>>>;

    fn layer(&self, leaf: S) -> Self::Service {
        ServiceBuilder::new()
            .layer(TraceLayer::new())
            .layer(MetricsLayer::new())
            .layer(self.skip.clone())
            .option_layer(self.rate_limit.clone())
            .timeout(self.timeout)
            .service(leaf)
    }
}

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
