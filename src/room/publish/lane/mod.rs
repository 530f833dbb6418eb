//! A room's publish lane (SPEC §12.1): the one place on the room's owner that sends the room's
//! IM events, in `room_version` order, packing whatever of the room is ready when it sends.
//!
//! The lane is the command path's driver of the delivery core ([`crate::delivery`]). The drain task
//! pushes each committed batch's IM events onto its room's [`Lane`] and goes on committing. One
//! lane task per room at a time ([`Lanes::run`]) opens a message in the room's
//! [`Window`](crate::delivery::window::Window) and takes its rate-limit permit **first**: at once,
//! or — after answering the commands queued `pending` — once it comes; only then is the message
//! packed ([`pack::next_pack`](crate::delivery::pack::next_pack)) from whatever of the room is
//! ready, up to `im_batch`, and sent through the shared stack (path `sync`). A room's turn under a
//! busy quota so carries whatever of the room is ready at that turn; an idle room sends each event
//! at once. A permit that came under another shard lease epoch than the one its message opened
//! under packs only what was queued at the opening (the room may have moved away and back: what
//! came later is not this send's). Events the filter answers without a call never enter the lane
//! (see [`super::sync_publish`]).
//!
//! A command waits for its own events only while their send can happen at once: when its
//! events are in the pack being sent, until the stack says it must wait for a permit, and
//! never longer than `rooms.sync_publish_wait`. Events queued behind a pack in flight answer
//! `pending` at once; the lane sends them moments later.
//!
//! A message IM refuses for its content is split by the lane itself ([`refused`]), in order,
//! and an event refused alone is parked at once: the room stays on its lane, and its other
//! events pay a few calls, not the worker's hand-off. The refused event's sender goes into
//! [quarantine](crate::delivery::quarantine): the packer sends its later events alone.
//!
//! The lane gives the room to the outbox worker ([`super::handoff`]) when it cannot keep its
//! promises: a send failed otherwise (the worker retries by policy), a split could not finish
//! within the rows' claim guard or could not park its culprit, or the oldest queued event has
//! waited `publish_timeout` (the room is offered more than IM takes, or the app-wide quota is
//! behind).

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use tokio::time::Instant;

use super::handoff::{Handoff, Route};
use crate::delivery::action::Action;
use crate::delivery::pack::PackLimits;
use crate::delivery::split::Fate;
use crate::delivery::{Outlet, Quarantine};
use crate::publish::{self, Event, Message, Path};
use crate::room::command::outcome::Delivery;

mod queue;
mod refused;

use queue::{Behind, Opened};
pub(in crate::room) use queue::{Lane, LaneEvent};

/// What came of a message's send, for its events (those of its pack, in order).
enum Sent {
    /// IM took them all.
    Delivered,
    /// IM refused the message for its content, and the lane split it: each event's fate.
    Split(Vec<Fate>),
    /// Not sent, or failed otherwise: the room goes to the worker.
    Failed,
}

/// What every room's lane task sends with: the delivery core's outlet (the permits and the
/// shared stack), the pack limits, the time bounds, how many messages of a room may be in
/// flight, and the hand-off to the worker.
pub(in crate::room) struct Lanes {
    pub(in crate::room) outlet: Outlet,
    pub(in crate::room) handoff: Arc<Handoff>,
    pub(in crate::room) pack: PackLimits,
    /// Messages of one room in flight at once (`im_batch.in_flight_per_room`, at least 1).
    pub(in crate::room) in_flight: usize,
    /// Bounds one send, its wait for a rate-limit permit included; an event not sent within it
    /// after its commit goes to the worker.
    pub(in crate::room) publish_timeout: Duration,
    /// Longest a command's answer waits for its events' first send.
    pub(in crate::room) sync_publish_wait: Duration,
    /// The senders whose events go alone, shared with the outbox worker.
    pub(in crate::room) quarantine: Arc<Quarantine>,
}

impl Lanes {
    /// Queues `events` (one batch's IM events, in order) on `lane` and starts its task when none
    /// runs.
    pub(in crate::room) fn push(self: &Arc<Self>, lane: &Arc<Lane>, room: &str, events: Vec<LaneEvent>) {
        if !events.is_empty() && lane.queue(room, events) {
            tokio::spawn(Arc::clone(self).run(Arc::clone(lane)));
        }
    }

    /// The lane task: opens messages off the front of the queue, up to `in_flight` at once
    /// (the next only once none waits for its permit), until nothing is queued or in flight.
    async fn run(self: Arc<Self>, lane: Arc<Lane>) {
        let mut sends = FuturesUnordered::new();
        loop {
            while lane.may_open(self.in_flight) {
                if lane.route.current() == Route::Worker {
                    // The room went to the worker after these were committed for the lane.
                    self.give_up(&lane, Vec::new()).await;
                    break;
                }
                match lane.open() {
                    None => break,
                    Some(Err(Behind)) => {
                        tracing::info!(room_id = %lane.room(), "Room lane behind; the outbox worker takes the room");
                        self.give_up(&lane, Vec::new()).await;
                        break;
                    }
                    Some(Ok(opened)) => sends.push(self.send(&lane, opened)),
                }
            }
            if sends.is_empty() {
                if lane.stop_if_idle() {
                    return;
                }
                continue;
            }
            tokio::select! {
                Some((pack, sent)) = sends.next() => self.finish(&lane, pack, sent).await,
                () = lane.pushed.notified(), if sends.len() < self.in_flight => {}
            }
        }
    }

    /// A message's send ended: its events marked delivered (those refused alone for their
    /// content parked already), or the room given to the worker with every event from the
    /// first one not delivered on.
    async fn finish(&self, lane: &Lane, events: Vec<LaneEvent>, sent: Sent) {
        lane.sent();
        let fates = match sent {
            Sent::Delivered => vec![Fate::Delivered; events.len()],
            Sent::Split(fates) => fates,
            Sent::Failed => return self.give_up(lane, events).await,
        };
        let mut delivered = Vec::with_capacity(events.len());
        let mut unsent = Vec::new();
        let mut failure = None;
        for (event, fate) in events.into_iter().zip(fates) {
            match fate {
                Fate::Delivered => {
                    event.settle(Delivery::Delivered);
                    delivered.push(event.event.event_id.clone());
                }
                Fate::RefusedAlone(_) => event.settle(Delivery::Pending),
                Fate::Failed(error) => {
                    failure.get_or_insert(error);
                    unsent.push(event);
                }
            }
        }
        self.handoff.delivered(delivered);
        if let (Some(error), Some(first)) = (failure, unsent.first()) {
            let class = publish::classify(&error);
            tracing::warn!(room_id = %lane.room(), event_id = %first.event.event_id, events = unsent.len(), class = class.as_str(), %error, "Room lane could not finish splitting a refused message; the outbox worker takes the room");
            self.give_up(lane, unsent).await;
        }
    }

    /// Sends the message `opened`: its permit first (the queued commands answered `pending`
    /// when it must wait; none after `publish_timeout`, a frozen process: the rows are guarded
    /// for the worker from their commit), then its pack, taken off the queue, through the
    /// stack. Its commands wait for the call at most `sync_publish_wait` from the opening; the
    /// send, permit wait included, is bounded by `publish_timeout`. A refusal of its content
    /// splits it ([`Self::split`]).
    async fn send(&self, lane: &Arc<Lane>, opened: Opened) -> (Vec<LaneEvent>, Sent) {
        let started = Instant::now();
        let deadline = started + self.publish_timeout;
        let room = lane.room();
        // A creation sends no message: its only permit is its API's, in `Outlet::call`.
        if !lane.head_is_call_alone()
            && self.outlet.permit_by(&room, deadline, || lane.settle_queued()).await.is_err()
        {
            lane.no_permit();
            tracing::warn!(room_id = %room, "Room lane permit not in hand within publish_timeout; the outbox worker takes the room");
            return (Vec::new(), Sent::Failed);
        }
        let pack = lane.take_pack(&opened, self.pack, &self.quarantine);
        let Some(first_id) = pack.first().map(|e| e.event.event_id.clone()) else {
            return (pack, Sent::Delivered);
        };
        let events: Vec<Event> = pack.iter().map(|e| e.event.clone()).collect();
        let call = self.outlet.call_by(Message::new(room.clone(), Path::Sync, events), deadline);
        tokio::pin!(call);
        let result = tokio::select! {
            result = &mut call => result,
            () = tokio::time::sleep_until(started + self.sync_publish_wait) => {
                for event in &pack {
                    event.settle(Delivery::Pending);
                }
                call.await
            }
        };
        let count = pack.len();
        let sent = match Action::of(result) {
            Action::Delivered => Sent::Delivered,
            Action::Split(error) => {
                tracing::info!(room_id = %room, event_id = %first_id, events = count, %error, "Room lane message refused for its content; splitting it");
                self.split(&pack, &room, error).await
            }
            Action::Failed(error) => {
                let class = publish::classify(error.as_ref());
                tracing::warn!(room_id = %room, event_id = %first_id, events = count, class = class.as_str(), %error, "Room lane publish failed; the outbox worker takes the room");
                Sent::Failed
            }
        };
        (pack, sent)
    }

    /// Gives the room to the worker: `unsent` and everything queued are answered `pending`
    /// and handed to the worker (claimable at once).
    async fn give_up(&self, lane: &Lane, unsent: Vec<LaneEvent>) {
        lane.route.to_worker();
        let events: Vec<LaneEvent> = unsent.into_iter().chain(lane.take_queue()).collect();
        for event in &events {
            event.settle(Delivery::Pending);
        }
        self.handoff.give_to_worker(events.iter().map(|e| e.event.event_id.clone()).collect()).await;
    }
}

#[cfg(test)]
mod tests;
