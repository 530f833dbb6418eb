//! The audit log: each batch is appended to `room_audit_log` in one transaction, in commit
//! order.
//!
//! A table in the service's own database rather than JSON lines in a rotating file: the log
//! is then as durable as the events (same backups, same replication), it can be queried by room
//! or event with SQL, and `event_id` is unique in it, so an event sent again after a crash is a
//! no-op — exactly once in the log, though delivery is at least once. Append-only: nothing in
//! the service updates or deletes its rows (retention of the log is the compliance team's
//! decision, not ours).

use std::time::Duration;

use serde::Deserialize;

use super::batch::Sink;
use crate::publish::error::SinkError;
use crate::publish::{ErrorClass, Message};
use crate::store::{AuditEntry, SharedRepository};

/// The one envelope field the log keeps in a column of its own.
#[derive(Deserialize)]
struct Occurred {
    occurred_at_ms: i64,
}

/// Appends batches to `room_audit_log`.
#[derive(Debug, Clone)]
pub struct AuditSink {
    repo: SharedRepository,
    timeout: Duration,
}

impl AuditSink {
    /// A sink writing through `repo`, each append bounded by `timeout` (the stack's timeout
    /// answers the events; this one ends the append itself, so the round does not wait on it).
    pub fn new(repo: SharedRepository, timeout: Duration) -> Self {
        Self { repo, timeout }
    }
}

impl Sink for AuditSink {
    async fn deliver(&self, messages: Vec<Message>) -> Result<(), SinkError> {
        let mut entries = Vec::with_capacity(messages.len());
        for (room_id, m) in
            messages.into_iter().flat_map(|m| m.events.into_iter().map(move |e| (m.group.clone(), e)))
        {
            // The consumer decoded every envelope before publishing it.
            let occurred: Occurred = serde_json::from_str(&m.body)
                .map_err(|e| SinkError::new(ErrorClass::Permanent, format!("audit log: envelope: {e}")))?;
            entries.push(AuditEntry {
                event_id: m.event_id,
                event_type: m.event_type.to_owned(),
                room_id,
                envelope: m.body.to_string(),
                occurred_at_ms: occurred.occurred_at_ms,
            });
        }
        match tokio::time::timeout(self.timeout, self.repo.append_audit(&entries)).await {
            Ok(appended) => {
                appended.map_err(|e| SinkError::new(ErrorClass::Transient, format!("audit log: {e}")))
            }
            Err(_) => Err(SinkError::new(ErrorClass::Timeout, "audit log: the append timed out")),
        }
    }
}
