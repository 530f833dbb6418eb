//! The publish step: right after commit, a batch's events go through the shared publish stack
//! (path `sync`). Events the filter answers without a call (RoomCreated, RoomHeatChanged,
//! RoomRankChanged: they never reach IM, so their order does not matter) are published at
//! once; the others go onto the room's lane ([`super::lane`]), which sends them in room order,
//! packed. The successes are handed to the delivery marker.
//!
//! A command is answered once each of its events is settled: delivered, skipped, or `pending`
//! (its send could not happen at once, or failed; the lane or the worker sends it later).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Notify, oneshot};
use tokio::time::Instant;
use tower::ServiceExt;

use super::cells::Cell;
use super::decide::Committed;
use super::drain::Answer;
use super::error::RoomError;
use super::lane::LaneEvent;
use super::marker::DeliveryMarker;
use super::outcome::{CommandResponse, Delivery, EventReceipt};
use crate::publish::pack::PackLimits;
use crate::publish::{Event, Message, Outcome, Path, Publisher};
use crate::store::SharedCommandStore;

/// How the publish step sends.
#[derive(Debug, Clone, Copy)]
pub(super) struct PublishSettings {
    /// Bounds one send of a lane, its wait for a rate-limit permit included; an event not
    /// sent within it after its commit goes to the worker.
    pub(super) publish_timeout: Duration,
    /// Longest a command's answer waits for its events' first send.
    pub(super) sync_publish_wait: Duration,
    /// How many events one message carries.
    pub(super) pack: PackLimits,
}

/// The publish step: committed events through the shared stack in room order, their marks to
/// the delivery marker, what the lanes give up to the worker.
pub(super) struct SyncPublish {
    pub(super) publisher: Publisher,
    pub(super) marker: DeliveryMarker,
    pub(super) repo: SharedCommandStore,
    pub(super) publish_timeout: Duration,
    pub(super) sync_publish_wait: Duration,
    pub(super) pack: PackLimits,
    worker_wake: Option<Arc<Notify>>,
}

impl SyncPublish {
    /// Publishes through `publisher`, marking through a marker task of its own over `repo`
    /// (so it must be called inside a Tokio runtime); wakes `worker_wake` when a lane gives
    /// events to the worker.
    pub(super) fn new(
        publisher: Publisher,
        repo: SharedCommandStore,
        settings: PublishSettings,
        worker_wake: Option<Arc<Notify>>,
    ) -> Self {
        let marker = DeliveryMarker::spawn(repo.clone());
        let PublishSettings { publish_timeout, sync_publish_wait, pack } = settings;
        Self { publisher, marker, repo, publish_timeout, sync_publish_wait, pack, worker_wake }
    }

    /// The delivery marker the successes are handed to.
    pub(super) fn marker(&self) -> &DeliveryMarker {
        &self.marker
    }

    /// Answers at once the commands with nothing to publish, publishes the events that never
    /// reach IM, and queues the others on the cell's lane behind what it already holds — or,
    /// when the batch was committed for the worker (`lane_owned` false: its rows are claimable
    /// already), answers them `pending` and wakes the worker.
    /// `started`: taken before the batch's INSERT, so the lane's deadline never outlasts the
    /// rows' claim guard however long the COMMIT took.
    pub(super) async fn in_lane(
        self: &Arc<Self>,
        cell: &Arc<Cell>,
        answers: Vec<Answer>,
        lane_owned: bool,
        started: Instant,
    ) {
        let start_by = started + self.publish_timeout;
        let mut lane = Vec::new();
        let mut skipped = Vec::new();
        let mut room = None;
        for (item, answer) in answers {
            let committed = match answer {
                Ok(committed) if !committed.envelopes.is_empty() => committed,
                other => {
                    let _ = item.reply.send(other.map(|c| c.response));
                    continue;
                }
            };
            let Committed { response, envelopes } = committed;
            let receipts = envelopes
                .iter()
                .map(|(envelope, _)| EventReceipt {
                    event_id: envelope.event_id.clone(),
                    event_type: envelope.event_type.as_str().into(),
                    delivery: Delivery::Pending,
                })
                .collect();
            let waiting = Waiting::new(response, receipts, item.reply);
            for (index, (envelope, json)) in envelopes.into_iter().enumerate() {
                room.get_or_insert_with(|| envelope.room_id.clone());
                let event = Event::from_envelope(&envelope, json);
                let waiting = Arc::clone(&waiting);
                if envelope.event_type.reaches_im() {
                    lane.push(LaneEvent { event, start_by, waiting, index });
                } else {
                    skipped.push((event, waiting, index));
                }
            }
        }
        let Some(room) = room else { return };
        if lane_owned {
            self.push(cell, &room, lane);
        } else if !lane.is_empty() {
            for event in &lane {
                event.waiting.settle(event.index, Delivery::Pending);
            }
            self.wake_worker();
        }
        let mut done = Vec::with_capacity(skipped.len());
        for (event, waiting, index) in skipped {
            let id = event.event_id.clone();
            let message = Message::new(room.clone(), Path::Sync, vec![event]);
            let delivery = match self.publisher.clone().oneshot(message).await {
                Ok(Outcome::Skipped) => Delivery::Skipped,
                Ok(Outcome::Delivered) => Delivery::Delivered,
                // Stays pending: the worker publishes it after its guard.
                Err(_) => Delivery::Pending,
            };
            if delivery != Delivery::Pending {
                done.push(id);
            }
            waiting.settle(index, delivery);
        }
        self.marker.submit(done);
    }

    /// Events a lane gave up: claimable at once (after the marks of the earlier ones are
    /// written, so the worker sees them delivered), and the worker woken.
    pub(super) async fn hand_to_worker(&self, event_ids: Vec<String>) {
        if event_ids.is_empty() {
            return;
        }
        self.marker.flush().await;
        if let Err(error) = self.repo.release_pending(&event_ids).await {
            tracing::warn!(events = event_ids.len(), %error, "Could not release pending events; the worker takes them after their guard");
        }
        self.wake_worker();
    }

    fn wake_worker(&self) {
        if let Some(wake) = &self.worker_wake {
            wake.notify_one();
        }
    }
}

/// A command's answer while its events are published: answered once every event is settled
/// (or when dropped, with what is not settled yet `pending`).
pub(super) struct Waiting {
    state: Mutex<Option<WaitingState>>,
}

struct WaitingState {
    response: CommandResponse,
    receipts: Vec<EventReceipt>,
    settled: Vec<bool>,
    reply: oneshot::Sender<Result<CommandResponse, RoomError>>,
}

impl Waiting {
    fn new(
        response: CommandResponse,
        receipts: Vec<EventReceipt>,
        reply: oneshot::Sender<Result<CommandResponse, RoomError>>,
    ) -> Arc<Self> {
        let settled = vec![false; receipts.len()];
        Arc::new(Self { state: Mutex::new(Some(WaitingState { response, receipts, settled, reply })) })
    }

    /// Settles the command's `index`-th event; the command is answered once all are. A
    /// second settlement of an event, or one after the answer, changes nothing.
    pub(super) fn settle(&self, index: usize, delivery: Delivery) {
        let mut slot = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let Some(state) = slot.as_mut() else { return };
        if let (Some(receipt), Some(settled)) = (state.receipts.get_mut(index), state.settled.get_mut(index))
            && !*settled
        {
            receipt.delivery = delivery;
            *settled = true;
        }
        if state.settled.iter().all(|s| *s)
            && let Some(state) = slot.take()
        {
            state.answer();
        }
    }
}

impl WaitingState {
    fn answer(self) {
        let WaitingState { mut response, receipts, reply, .. } = self;
        response.events = receipts;
        let _ = reply.send(Ok(response));
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        let slot = self.state.get_mut().unwrap_or_else(|e| e.into_inner());
        if let Some(state) = slot.take() {
            state.answer();
        }
    }
}
