//! The audit log: each batch is appended to `room_audit_log` in one transaction, in commit
//! order.
//!
//! A table in the service's own database rather than JSON lines in a rotating file: the log
//! is then as durable as the events (same backups, same replication), it can be queried by room
//! or event with SQL, and `event_id` is unique in it, so an event sent again after a crash is a
//! no-op — exactly once in the log, though delivery is at least once. Append-only: nothing in
//! the service updates or deletes its rows (retention of the log is the compliance team's
//! decision, not ours).

use crate::publish::error::SinkError;
use crate::publish::{ErrorClass, Message};
use crate::store::{AuditEntry, SharedRepository};

use super::batch::Sink;

/// Appends batches to `room_audit_log`.
#[derive(Debug, Clone)]
pub struct AuditSink {
    repo: SharedRepository,
}

impl AuditSink {
    /// A sink writing through `repo`.
    pub fn new(repo: SharedRepository) -> Self {
        Self { repo }
    }
}

impl Sink for AuditSink {
    async fn deliver(&self, messages: Vec<Message>) -> Result<(), SinkError> {
        let entries: Vec<AuditEntry> = messages
            .into_iter()
            .map(|m| AuditEntry {
                event_id: m.event_id,
                event_type: m.event_type.to_owned(),
                room_id: m.group,
                envelope: m.body.to_string(),
            })
            .collect();
        self.repo
            .append_audit(&entries)
            .await
            .map(|_| ())
            .map_err(|e| SinkError::new(ErrorClass::Transient, format!("audit log: {e}")))
    }
}
