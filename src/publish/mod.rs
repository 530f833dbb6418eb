//! Publishing: one plain `tower::Service` stack that takes a [`Message`] (event envelopes
//! already serialised, complete when built) and answers an [`Outcome`]. A room's lane and the
//! outbox worker both call the very same stack through the delivery core
//! ([`crate::delivery`], which takes each message's rate-limit permit before building it),
//! built once at startup (`main.rs`, through `app::publisher`), its layers in the order
//! [`stack::PublishLayers`] writes down:
//!
//! ```text
//! TraceLayer → MetricsLayer → EventFilterLayer → TimeoutLayer → TencentImService | LogSink
//! ```
//!
//! This module knows nothing of rooms, storage or HTTP, so another sink (the webhook and audit
//! consumers) reuses the layers around a different leaf (with `tower`'s rate limit).

pub mod admin;
pub mod classify;
pub mod error;
pub mod filter;
pub mod log_sink;
pub mod metrics;
pub mod stack;
pub mod trace;

pub mod tencent;
#[cfg(test)]
pub(crate) mod test_support;

pub use admin::{AdminApi, AdminCall};
pub use classify::classify;
pub use error::ErrorClass;

use std::sync::Arc;

use opentelemetry::trace::SpanContext;

/// The error type between layers.
pub type BoxError = tower::BoxError;

/// The publish stack with its concrete type erased, as handed to the room service and the
/// outbox worker.
pub type Publisher = tower::util::BoxCloneSyncService<Message, Outcome, BoxError>;

/// One call of the publish stack: one or more consecutive events of ONE group (a room), in
/// their order. The Tencent IM leaf sends them as one message, one element per event (SPEC
/// §12.1); every rate limit counts the message once, whatever it carries. The answer applies to
/// every event of the message.
#[derive(Clone, Debug)]
pub struct Message {
    /// Routing key: the room id. The IM leaf maps it to its group id.
    pub group: String,
    /// Which caller publishes: the command path or the worker.
    pub path: Path,
    /// The events, in order; never empty when built with [`Message::new`].
    pub events: Vec<Event>,
}

/// Default `im_batch.max_bytes`: content bytes of one message (Tencent allows 12 KB).
pub const DEFAULT_MAX_BYTES: usize = 11_000;

/// Tencent's own limit on a message's content, in bytes.
pub const TENCENT_MAX_CONTENT_BYTES: usize = 12 * 1024;

/// Bytes one event adds to a message's content: its body and its type name (what Tencent
/// counts against its 12 KB). The one measure the packer packs by and the IM leaf refuses by.
pub fn content_bytes(body: &str, event_type: &str) -> usize {
    body.len() + event_type.len()
}

/// One event of a [`Message`].
#[derive(Clone, Debug)]
pub struct Event {
    /// Stable id of the event (UUIDv7); receivers dedup on it.
    pub event_id: String,
    /// Event type name, from a closed set (bounded metric label).
    pub event_type: &'static str,
    /// Delivery priority asked of the receiver.
    pub priority: Priority,
    /// The envelope as JSON, sent unchanged.
    pub body: Arc<str>,
    /// Whose content it carries, when a member acts in it (a gift's sender, the member who
    /// joined or left): an opaque key the packer uses to send a
    /// [quarantined](crate::delivery::quarantine) sender's events alone.
    pub sender: Option<Arc<str>>,
    /// The other users whose ids its content carries from the mic seats
    /// ([`EventEnvelope::seated`](crate::domain::EventEnvelope::seated): a seat list's holders,
    /// a seat change's cause): held by the quarantine like its sender. Empty for most events.
    pub seated: Arc<[Arc<str>]>,
    /// The span it traces to, when its trace is sampled (SPEC §13.4): on the command path its
    /// command's `lane` span, the parent of the call's span; from an outbox row the command's
    /// span, which the redelivery's span links to.
    pub trace: Option<SpanContext>,
    /// The IM group operation its outbox row carries besides (or instead of) a message
    /// (SPEC §14.2): such an event is a message of its own, and none of its room's other
    /// messages is in flight beside it.
    pub admin: Option<Arc<AdminCall>>,
}

impl Event {
    /// Bytes this event adds to a message's content ([`content_bytes`]).
    pub fn content_bytes(&self) -> usize {
        content_bytes(&self.body, self.event_type)
    }
}

impl Message {
    /// A message of `events` (one or more, of `group`, in order) published by `path`.
    pub fn new(group: String, path: Path, events: Vec<Event>) -> Self {
        Self { group, path, events }
    }

    /// The first event; every message built by [`Message::new`] has one.
    pub fn first(&self) -> Option<&Event> {
        self.events.first()
    }

    /// The first event's type: the label of the message's span and latency.
    pub fn event_type(&self) -> &'static str {
        self.first().map_or("none", |e| e.event_type)
    }

    /// The first event's id, for logs and spans.
    pub fn event_id(&self) -> &str {
        self.first().map_or("", |e| e.event_id.as_str())
    }

    /// The highest priority of its events.
    pub fn priority(&self) -> Priority {
        if self.events.iter().any(|e| e.priority == Priority::High) {
            Priority::High
        } else {
            Priority::Normal
        }
    }

    /// The content's size: every event's [`Event::content_bytes`].
    pub fn content_bytes(&self) -> usize {
        self.events.iter().map(Event::content_bytes).sum()
    }
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
    /// True for the paths that call Tencent IM (the synchronous push and the outbox worker).
    pub fn calls_im(self) -> bool {
        matches!(self, Path::Sync | Path::Worker)
    }

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
    /// Every outcome.
    pub const ALL: [Outcome; 2] = [Outcome::Delivered, Outcome::Skipped];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Delivered => "delivered",
            Outcome::Skipped => "skipped",
        }
    }
}
