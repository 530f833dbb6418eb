//! Publishing: one `tower::Service` stack that takes a [`Message`] (an event envelope already
//! serialised) and answers an [`Outcome`]. The synchronous command path and the outbox worker
//! both call the very same stack, built once in `main.rs`:
//!
//! ```text
//! TraceLayer → MetricsLayer → EventFilterLayer → RateLimitLayer → TimeoutLayer → TencentImService | LogSink
//! ```
//!
//! This module knows nothing of rooms, storage or HTTP, so another sink (activity, audit) can
//! reuse the layers around a different leaf.

pub mod error;
pub mod filter;
pub mod log_sink;
pub mod metrics;
pub mod rate_limit;
pub mod stack;
pub mod trace;

pub mod tencent;
#[cfg(test)]
pub(crate) mod test_support;

pub use error::{ErrorClass, classify};

use std::sync::Arc;

/// The error type between layers.
pub type BoxError = tower::BoxError;

/// The publish stack with its concrete type erased, as handed to the room service and the
/// outbox worker.
pub type Publisher = tower::util::BoxCloneSyncService<Message, Outcome, BoxError>;

/// One event to publish.
#[derive(Clone, Debug)]
pub struct Message {
    /// Stable id of the event (UUIDv7); receivers dedup on it.
    pub event_id: String,
    /// Event type name, from a closed set (bounded metric label).
    pub event_type: &'static str,
    /// Routing key: the room id. The IM leaf maps it to its group id.
    pub group: String,
    /// Delivery priority asked of the receiver.
    pub priority: Priority,
    /// The envelope as JSON, sent unchanged.
    pub body: Arc<str>,
    /// Which caller publishes: the command path or the worker.
    pub path: Path,
}

/// Delivery priority of a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Priority {
    /// Gifts and room close.
    High,
    /// Everything else.
    Normal,
}

/// Who publishes; a bounded label on spans and metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Path {
    /// The synchronous push right after a command commits.
    Sync,
    /// The outbox worker re-delivering what the synchronous push missed.
    Worker,
    /// The activity webhook consumer (its own stack and position).
    Webhook,
    /// The audit log consumer (its own stack and position).
    Audit,
}

impl Path {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Path::Sync => "sync",
            Path::Worker => "worker",
            Path::Webhook => "webhook",
            Path::Audit => "audit",
        }
    }
}

/// A successful publish.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The sink accepted the message.
    Delivered,
    /// The event type is not meant for this sink; answered without calling it.
    Skipped,
}

impl Outcome {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Delivered => "delivered",
            Outcome::Skipped => "skipped",
        }
    }
}
