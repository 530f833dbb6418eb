//! The synchronous push: right after commit, a batch's events go through the shared publish
//! stack (path `sync`) in room order — one batch after another, on the cell's publish lane —
//! each command's publish ending at most `publish_timeout` after its commit; the successes are
//! handed to the delivery marker.
//!
//! An event is never sent while an earlier event of its room is undelivered: once one is left
//! pending (IM failed, no rate-limit permit, deadline passed), every later event of the room is
//! left pending too, made claimable at once, and the worker is woken to deliver them in order.
//! The lane publishes again once the database shows the oldest undelivered event of the room
//! is the next one it holds.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::sync::{Notify, oneshot};
use tokio::time::Instant;
use tower::ServiceExt;

use super::cells::Cell;
use super::decide::Committed;
use super::drain::Answer;
use super::marker::DeliveryMarker;
use super::outcome::{CommandResponse, Delivery, EventReceipt};
use crate::domain::EventEnvelope;
use crate::publish::{self, Event, Message, Outcome, Path, Publisher};
use crate::store::SharedCommandStore;

/// The publish step: committed events through the shared stack in room order, their marks to
/// the delivery marker, what is left pending to the worker.
pub(super) struct SyncPublish {
    publisher: Publisher,
    marker: DeliveryMarker,
    repo: SharedCommandStore,
    publish_timeout: Duration,
    worker_wake: Option<Arc<Notify>>,
}

impl SyncPublish {
    /// Publishes through `publisher`, marking through a marker task of its own over `repo`
    /// (so it must be called inside a Tokio runtime); wakes `worker_wake` when it leaves events
    /// pending.
    pub(super) fn new(
        publisher: Publisher,
        repo: SharedCommandStore,
        publish_timeout: Duration,
        worker_wake: Option<Arc<Notify>>,
    ) -> Self {
        let marker = DeliveryMarker::spawn(repo.clone());
        Self { publisher, marker, repo, publish_timeout, worker_wake }
    }

    /// The delivery marker the successes are handed to.
    pub(super) fn marker(&self) -> &DeliveryMarker {
        &self.marker
    }

    /// Answers at once the commands with nothing to publish, and queues the others on the
    /// cell's publish lane behind the previous batch.
    pub(super) fn in_lane(self: &Arc<Self>, cell: &Arc<Cell>, answers: Vec<Answer>) {
        // Each publish is bounded by the stack's own timeout, which is counted and traced; this
        // deadline (a hair later, so the stack's timeout fires first) bounds the wait in the
        // lane behind earlier commands.
        let deadline = Instant::now() + self.publish_timeout + Duration::from_millis(10);
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
        let Some(first) = lane.first().and_then(|(_, c)| c.envelopes.first()).map(|(e, _)| e.clone()) else {
            return;
        };
        let (done, next) = oneshot::channel();
        let previous = cell.lane_after(next);
        let (service, cell) = (Arc::clone(self), Arc::clone(cell));
        tokio::spawn(async move {
            if let Some(previous) = previous {
                let _ = previous.await;
            }
            let mut clear = cell.sync_clear.load(Ordering::Acquire) || service.is_next(&first).await;
            let mut left = Vec::new();
            for (reply, committed) in lane {
                let response = service.publish(committed, deadline, &mut clear, &mut left).await;
                let _ = reply.send(Ok(response));
            }
            cell.sync_clear.store(clear, Ordering::Release);
            // Before the next batch of the room runs: releases stay in room order.
            if !left.is_empty() {
                service.hand_to_worker(left).await;
            }
            let _ = done.send(());
        });
    }

    /// True when nothing of the room older than `first` waits undelivered.
    async fn is_next(&self, first: &EventEnvelope) -> bool {
        match self.repo.has_earlier_undelivered(&first.room_id, &first.event_id).await {
            Ok(earlier) => !earlier,
            Err(error) => {
                tracing::warn!(room_id = %first.room_id, %error, "Room order check failed; leaving events to the worker");
                false
            }
        }
    }

    /// Events the synchronous path left pending: claimable at once (after the marks of the
    /// earlier ones are written, so the worker sees them delivered), and the worker woken.
    async fn hand_to_worker(&self, event_ids: Vec<String>) {
        self.marker.flush().await;
        if let Err(error) = self.repo.release_pending(&event_ids).await {
            tracing::warn!(events = event_ids.len(), %error, "Could not release pending events; the worker takes them after their guard");
        }
        if let Some(wake) = &self.worker_wake {
            wake.notify_one();
        }
    }

    /// Publishes a committed command's events in order through the shared stack while the room
    /// is `clear` and `deadline` has not passed; the first event left pending clears `clear`,
    /// and it and every later one go to `left`. Hands the successes to the delivery marker
    /// (best effort, not awaited) and fills in the receipts.
    async fn publish(
        &self,
        committed: Committed,
        deadline: Instant,
        clear: &mut bool,
        left: &mut Vec<String>,
    ) -> CommandResponse {
        let Committed { mut response, envelopes } = committed;
        let mut receipts = Vec::with_capacity(envelopes.len());
        let mut done = Vec::new();
        for (envelope, json) in &envelopes {
            let delivery =
                if *clear { self.publish_one(envelope, json, deadline).await } else { Delivery::Pending };
            match delivery {
                Delivery::Pending => {
                    *clear = false;
                    left.push(envelope.event_id.clone());
                }
                _ => done.push(envelope.event_id.clone()),
            }
            receipts.push(EventReceipt {
                event_id: envelope.event_id.clone(),
                event_type: envelope.event_type.as_str().into(),
                delivery,
            });
        }
        self.marker.submit(done);
        response.events = receipts;
        response
    }

    async fn publish_one(&self, envelope: &EventEnvelope, json: &Arc<str>, deadline: Instant) -> Delivery {
        let event = Event::from_envelope(envelope, Arc::clone(json));
        let message = Message::new(envelope.room_id.clone(), Path::Sync, vec![event]);
        match tokio::time::timeout_at(deadline, self.publisher.clone().oneshot(message)).await {
            Ok(Ok(Outcome::Delivered)) => Delivery::Delivered,
            Ok(Ok(Outcome::Skipped)) => Delivery::Skipped,
            Ok(Err(error)) => {
                let class = publish::classify(error.as_ref());
                if class != publish::ErrorClass::Throttled {
                    tracing::warn!(event_id = %envelope.event_id, class = class.as_str(), %error, "Synchronous publish failed; the outbox worker will retry");
                }
                Delivery::Pending
            }
            Err(_elapsed) => Delivery::Pending,
        }
    }
}
