//! The publish step: right after commit, a batch's events go through the shared publish stack
//! (path `sync`). Events the filter answers without a call (RoomCreated, RoomHeatChanged,
//! RoomRankChanged: they never reach IM, so their order does not matter) are published at
//! once; the others go onto the room's lane ([`super::lane`]), which sends them in room order,
//! packed — or, on the worker's route ([`super::handoff`]), are left to the worker. The
//! successes are handed to the delivery marker.
//!
//! A command is answered once each of its events is settled: delivered, skipped, or `pending`
//! (its send could not happen at once, or failed; the lane or the worker sends it later).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use super::handoff::{Handoff, Route};
use super::lane::{Lane, LaneEvent, Lanes};
use super::waiting::Waiting;
use crate::delivery::groups::Groups;
use crate::delivery::pack::{self, PackLimits};
use crate::delivery::{Outlet, Quarantine, SharedPermits};
use crate::publish::{Event, Message, Outcome, Path, Publisher};
use crate::room::command::decide::{Answer, Committed};
use crate::room::command::outcome::{Delivery, EventReceipt};
use crate::store::SharedCommandStore;
use crate::telemetry::traces;

/// How the publish step sends.
#[derive(Debug, Clone)]
pub(in crate::room) struct PublishSettings {
    /// Bounds one send of a lane, its wait for a rate-limit permit included; an event not
    /// sent within it after its commit goes to the worker.
    pub(in crate::room) publish_timeout: Duration,
    /// Longest a command's answer waits for its events' first send.
    pub(in crate::room) sync_publish_wait: Duration,
    /// How many events one message carries.
    pub(in crate::room) pack: PackLimits,
    /// Messages of one room in flight at once.
    pub(in crate::room) in_flight_per_room: usize,
    /// The senders whose events go alone, shared with the outbox worker.
    pub(in crate::room) quarantine: Arc<Quarantine>,
    /// Where the lanes take their permits, shared with the outbox worker.
    pub(in crate::room) permits: SharedPermits,
    /// The IM group operations the events carry.
    pub(in crate::room) groups: Groups,
}

/// The publish step: committed events through the shared stack in room order (the lanes),
/// the hand-off to the worker.
pub(in crate::room) struct SyncPublish {
    outlet: Outlet,
    lanes: Arc<Lanes>,
    handoff: Arc<Handoff>,
    publish_timeout: Duration,
    groups: Groups,
}

impl SyncPublish {
    /// Publishes through `publisher`, marking through a marker task of its own over `repo`
    /// (so it must be called inside a Tokio runtime); wakes `worker_wake` when events are left
    /// to the worker.
    pub(in crate::room) fn new(
        publisher: Publisher,
        repo: SharedCommandStore,
        settings: PublishSettings,
        worker_wake: Option<Arc<Notify>>,
    ) -> Self {
        let PublishSettings {
            publish_timeout,
            sync_publish_wait,
            pack,
            in_flight_per_room,
            quarantine,
            permits,
            groups,
        } = settings;
        let outlet = Outlet::new(publisher, permits);
        let handoff = Arc::new(Handoff::new(repo, publish_timeout, worker_wake));
        let lanes = Lanes {
            outlet: outlet.clone(),
            handoff: Arc::clone(&handoff),
            pack,
            in_flight: in_flight_per_room.max(1),
            publish_timeout,
            sync_publish_wait,
            quarantine,
        };
        Self { outlet, lanes: Arc::new(lanes), handoff, publish_timeout, groups }
    }

    /// The hand-off between the lanes and the worker (the route of a commit, its claim guard,
    /// the delivery marks).
    pub(in crate::room) fn handoff(&self) -> &Handoff {
        &self.handoff
    }

    /// Answers at once the commands with nothing to publish, publishes the events that never
    /// reach IM, and queues the others on the room's lane behind what it already holds — or,
    /// when the batch was committed on the worker's `route` (its rows are claimable already),
    /// answers them `pending` and wakes the worker.
    /// `started`: taken before the batch's INSERT, so the lane's deadline never outlasts the
    /// rows' claim guard however long the COMMIT took.
    pub(in crate::room) async fn publish(
        &self,
        lane: &Arc<Lane>,
        answers: Vec<Answer>,
        route: Route,
        started: Instant,
    ) {
        let start_by = started + self.publish_timeout;
        let mut to_lane = Vec::new();
        let mut skipped = Vec::new();
        let mut room = None;
        for (item, answer) in answers {
            let committed = match answer {
                Ok(committed) if !committed.envelopes.is_empty() => committed,
                other => {
                    item.reply.send(other.map(|c| c.response));
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
            // The command's `lane` span, parent of its IM calls' spans (SPEC §13.4).
            let lane = match &item.trace {
                Some(trace) => tracing::info_span!(parent: trace.span(), "lane", events = envelopes.len()),
                None => tracing::Span::none(),
            };
            let trace = traces::sampled_context(&lane);
            let waiting = Waiting::new(response, receipts, item.reply, lane);
            for (index, (envelope, json)) in envelopes.into_iter().enumerate() {
                room.get_or_insert_with(|| envelope.room_id.clone());
                let mut event = Event::from_envelope(&envelope, json);
                event.trace.clone_from(&trace);
                self.groups.attach(&mut event);
                let waiting = Arc::clone(&waiting);
                if pack::reaches_im(&event) {
                    to_lane.push(LaneEvent { event, start_by, waiting, index });
                } else {
                    skipped.push((event, waiting, index));
                }
            }
        }
        let Some(room) = room else { return };
        match route {
            Route::Lane => self.lanes.push(lane, &room, to_lane),
            Route::Worker if !to_lane.is_empty() => {
                for event in &to_lane {
                    event.settle(Delivery::Pending);
                }
                self.handoff.wake_worker();
            }
            Route::Worker => {}
        }
        self.publish_skipped(&room, skipped).await;
    }

    /// Publishes the events the filter answers without a call, one message each.
    async fn publish_skipped(&self, room: &str, skipped: Vec<(Event, Arc<Waiting>, usize)>) {
        let mut done = Vec::with_capacity(skipped.len());
        for (event, waiting, index) in skipped {
            let id = event.event_id.clone();
            let message = Message::new(room.to_owned(), Path::Sync, vec![event]);
            let delivery = match self.outlet.call(message).await {
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
        self.handoff.delivered(done);
    }
}
