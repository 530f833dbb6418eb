//! The envelope codec: the one way an event envelope becomes a publishable [`Event`] — on the
//! lane (from the envelope just committed) and on the worker's and the consumers' paths (from
//! the stored row) — and the one answer to whether an event type reaches IM.
//!
//! It lives in the delivery core rather than in [`crate::publish`], which knows no domain
//! types, or [`crate::domain`], which knows no publishing.

use std::sync::Arc;

use crate::domain::{EventEnvelope, EventType};
use crate::publish::{Event, Priority};
use crate::store::OutboxRow;
use crate::telemetry::traces;

/// Whether events of the stored type `event_type` reach IM (the others are answered by the
/// publish stack's filter without a call). An unknown type is tried, and parked by the leaf.
pub fn reaches_im(event_type: &str) -> bool {
    event_type.parse::<EventType>().map_or(true, EventType::reaches_im)
}

/// Decodes a row's envelope into the event to publish. The body is the stored JSON,
/// unchanged, so every retry sends the same bytes the synchronous path sent. The event traces
/// to the command's span the row keeps, if any.
pub fn decode(row: &OutboxRow) -> Result<Event, String> {
    decode_traced(&row.event_id, &row.envelope, row.trace_context.as_deref())
}

/// [`decode_envelope`], tracing to the stored `traceparent` when traces are exported.
pub fn decode_traced(event_id: &str, envelope: &str, trace: Option<&str>) -> Result<Event, String> {
    let mut event = decode_envelope(event_id, envelope)?;
    if traces::on() {
        event.trace = trace.and_then(traces::parse_traceparent);
    }
    Ok(event)
}

/// Decodes a stored envelope (of the event `event_id`) into the event to publish.
pub fn decode_envelope(event_id: &str, envelope: &str) -> Result<Event, String> {
    let decoded: EventEnvelope =
        serde_json::from_str(envelope).map_err(|e| format!("undecodable envelope: {e}"))?;
    if decoded.event_id != event_id {
        return Err("undecodable envelope: its event_id differs from the row's".into());
    }
    Ok(Event::from_envelope(&decoded, Arc::from(envelope)))
}

/// The one way an event envelope becomes a publishable [`Event`] (see the module docs).
impl Event {
    /// The event of `envelope`, whose JSON is `body` (sent unchanged).
    pub fn from_envelope(envelope: &EventEnvelope, body: Arc<str>) -> Self {
        let priority = if envelope.event_type.is_high_priority() { Priority::High } else { Priority::Normal };
        Self {
            event_id: envelope.event_id.clone(),
            event_type: envelope.event_type.as_str(),
            priority,
            body,
            sender: envelope.actor().map(Arc::from),
            seated: envelope.seated().into_iter().map(Arc::from).collect(),
            trace: None,
            admin: None,
        }
    }
}
