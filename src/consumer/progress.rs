//! What a consumer reports and reads besides delivering: its gauges (position and lag, the lag
//! on the database clock) and the messages of the events it read.

use super::ConsumerName;
use crate::publish::Message;
use crate::store::{ConsumerRepository, EventRow};
use crate::telemetry::names::{CONSUMER_LAG_SECONDS, CONSUMER_POSITION, LABEL_CONSUMER};

/// Sets the position and lag gauges of `name` at `position`.
pub(super) async fn export(repo: &dyn ConsumerRepository, name: ConsumerName, position: i64) {
    let name = name.as_str();
    metrics::gauge!(CONSUMER_POSITION, LABEL_CONSUMER => name).set(position as f64);
    match repo.consumer_lag(position).await {
        Ok(lag) => metrics::gauge!(CONSUMER_LAG_SECONDS, LABEL_CONSUMER => name)
            .set(lag.unwrap_or_default().as_secs_f64()),
        Err(error) => tracing::debug!(consumer = name, %error, "Cannot read the consumer lag"),
    }
}

/// Exports the stored position of `name`: standing by, an instance reports the holder's
/// progress, never a stale figure of its own (dashboards and the alert take the max over
/// instances).
pub(super) async fn export_stored(repo: &dyn ConsumerRepository, name: ConsumerName) {
    match repo.list_consumers().await {
        Ok(rows) => {
            if let Some(row) = rows.into_iter().find(|r| r.name == name.as_str()) {
                export(repo, name, row.position).await;
            }
        }
        Err(error) => tracing::debug!(consumer = name.as_str(), %error, "Cannot read the consumer's row"),
    }
}

/// The messages of `events`; an envelope that cannot be decoded can never be delivered
/// anywhere (the outbox worker parks it for IM): it is passed over, loudly.
pub(super) fn decode(name: ConsumerName, events: &[EventRow]) -> Vec<Message> {
    events
        .iter()
        .filter_map(|e| {
            match crate::delivery::codec::decode_traced(&e.event_id, &e.envelope, e.trace_context.as_deref())
            {
                Ok(event) => Some(Message::new(e.room_id.clone(), name.path(), vec![event])),
                Err(error) => {
                    tracing::error!(
                        consumer = name.as_str(),
                        event_id = %e.event_id,
                        outbox_id = e.id,
                        %error,
                        "Undecodable event passed over"
                    );
                    None
                }
            }
        })
        .collect()
}
