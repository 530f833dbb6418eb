//! The synchronous push: right after commit, a command's events go through the shared publish
//! stack (path `sync`) in order, bounded by `publish_timeout` in all; the successes are handed
//! to the delivery marker.

use std::time::Duration;

use tower::ServiceExt;

use super::outcome::{CommandResponse, Delivery, EventReceipt};
use super::pipeline::{Committed, RoomService};
use crate::publish::{self, Message, Outcome, Path, Priority};

impl RoomService {
    /// Publishes a committed command's events in order through the shared stack, hands the
    /// successes to the delivery marker (best effort, not awaited) and fills in the receipts. Waits at most
    /// `publish_timeout` in all; what is left stays pending for the worker.
    pub(super) async fn publish(&self, committed: Committed) -> CommandResponse {
        let Committed { mut response, envelopes } = committed;
        if envelopes.is_empty() {
            return response;
        }
        let mut receipts: Vec<EventReceipt> = envelopes
            .iter()
            .map(|(e, _)| EventReceipt {
                event_id: e.event_id.clone(),
                event_type: e.event_type.as_str().into(),
                delivery: Delivery::Pending,
            })
            .collect();
        let publish_all = async {
            for ((envelope, json), receipt) in envelopes.iter().zip(receipts.iter_mut()) {
                let message = Message {
                    event_id: envelope.event_id.clone(),
                    event_type: envelope.event_type.as_str(),
                    group: envelope.room_id.clone(),
                    priority: if envelope.event_type.is_high_priority() {
                        Priority::High
                    } else {
                        Priority::Normal
                    },
                    body: json.clone(),
                    path: Path::Sync,
                };
                receipt.delivery = match self.inner.publisher.clone().oneshot(message).await {
                    Ok(Outcome::Delivered) => Delivery::Delivered,
                    Ok(Outcome::Skipped) => Delivery::Skipped,
                    Err(error) => {
                        tracing::warn!(
                            event_id = %envelope.event_id,
                            class = publish::classify(error.as_ref()).as_str(),
                            %error,
                            "Synchronous publish failed; the outbox worker will retry"
                        );
                        Delivery::Pending
                    }
                };
            }
        };
        // Each publish is bounded by the stack's own timeout, which is counted and traced; a
        // command has at most one IM-visible event, so this guard (a hair later, so the stack's
        // timeout fires first) only bounds a stack without one.
        let guard = self.inner.options.publish_timeout + Duration::from_millis(10);
        let _ = tokio::time::timeout(guard, publish_all).await;
        let done: Vec<String> =
            receipts.iter().filter(|r| r.delivery != Delivery::Pending).map(|r| r.event_id.clone()).collect();
        self.inner.marker.submit(done);
        response.events = receipts;
        response
    }
}
