//! The synchronous push: right after commit, a batch's events go through the shared publish
//! stack (path `sync`) in room order — one batch after another, on the cell's publish lane —
//! each command's publish ending at most `publish_timeout` after its commit; the successes are
//! handed to the delivery marker. What is left stays pending for the worker.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;
use tower::ServiceExt;

use super::batch::Committed;
use super::cells::Cell;
use super::drain::Answer;
use super::outcome::{CommandResponse, Delivery, EventReceipt};
use super::pipeline::RoomService;
use crate::publish::{self, Message, Outcome, Path, Priority};

impl RoomService {
    /// Answers at once the commands with nothing to publish, and queues the others on the
    /// cell's publish lane behind the previous batch.
    pub(super) fn publish_in_lane(&self, cell: &Cell, answers: Vec<Answer>) {
        // Each publish is bounded by the stack's own timeout, which is counted and traced; this
        // deadline (a hair later, so the stack's timeout fires first) bounds the wait in the
        // lane behind earlier commands.
        let deadline = Instant::now() + self.inner.options.publish_timeout + Duration::from_millis(10);
        let mut lane = Vec::new();
        for (item, answer) in answers {
            match answer {
                Ok(committed) if !committed.envelopes.is_empty() => lane.push((item.reply, committed)),
                Ok(committed) => {
                    let _ = item.reply.send(Ok(committed.response));
                }
                Err(e) => {
                    let _ = item.reply.send(Err(e));
                }
            }
        }
        if lane.is_empty() {
            return;
        }
        let (done, next) = oneshot::channel();
        let previous = cell.lane_after(next);
        let service = self.clone();
        tokio::spawn(async move {
            if let Some(previous) = previous {
                let _ = previous.await;
            }
            for (reply, committed) in lane {
                let response = service.publish(committed, deadline).await;
                let _ = reply.send(Ok(response));
            }
            let _ = done.send(());
        });
    }

    /// Publishes a committed command's events in order through the shared stack until
    /// `deadline`, hands the successes to the delivery marker (best effort, not awaited) and
    /// fills in the receipts.
    async fn publish(&self, committed: Committed, deadline: Instant) -> CommandResponse {
        let Committed { mut response, envelopes } = committed;
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
                    body: Arc::clone(json),
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
        let _ = tokio::time::timeout_at(deadline, publish_all).await;
        let done: Vec<String> =
            receipts.iter().filter(|r| r.delivery != Delivery::Pending).map(|r| r.event_id.clone()).collect();
        self.inner.marker.submit(done);
        response.events = receipts;
        response
    }
}
