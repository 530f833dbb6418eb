//! A room's publish lane (SPEC §12.1): the one place on the room's owner that sends the room's
//! IM events, in `room_version` order, packing whatever of the room is ready when it sends.
//!
//! The drain task pushes each committed batch's IM events onto its room's [`Lane`] and goes on
//! committing. One lane task per room at a time ([`Lanes::run`]) takes the ready events from
//! the front — up to `im_batch` — and sends them as one message through the shared stack (path
//! `sync`), with a [`Turn`]: when the rate limit makes the message wait for its permit, the
//! commands waiting on it are answered `pending`, and when the permit comes the message takes
//! on the events committed meanwhile, up to `im_batch` (only under the shard lease epoch the
//! send began with: under another, the room may have moved away and back, and its queue is not
//! this send's). A room's turn under a busy quota carries whatever of the room is ready at that
//! turn; an idle room sends each event at once. Events the filter answers without a call never
//! enter the lane (see [`super::sync_publish`]).
//!
//! A command waits for its own events only while their send can happen at once: when its
//! events are in the pack being sent, until the stack says it must wait for a permit, and
//! never longer than `rooms.sync_publish_wait`. Events queued behind a pack in flight answer
//! `pending` at once; the lane sends them moments later.
//!
//! A message IM refuses for its content is split by the lane itself ([`refused`]), in order,
//! and an event refused alone is parked at once: the room stays on its lane, and its other
//! events pay a few calls, not the worker's hand-off. The refused event's sender goes into
//! [quarantine](crate::publish::quarantine): the packing here sends its later events alone.
//!
//! The lane gives the room to the outbox worker ([`super::handoff`]) when it cannot keep its
//! promises: a send failed otherwise (the worker retries by policy), a split could not finish
//! within the rows' claim guard or could not park its culprit, or the oldest queued event has
//! waited `publish_timeout` (the room is offered more than IM takes, or the app-wide quota is
//! behind).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use tokio::sync::Notify;
use tokio::time::Instant;
use tower::ServiceExt;

use super::handoff::{Handoff, RoomRoute, Route};
use super::outcome::Delivery;
use super::waiting::Waiting;
use crate::publish::classify::is_content_refusal;
use crate::publish::pack::PackLimits;
use crate::publish::split::Fate;
use crate::publish::{self, Event, Message, Path, Publisher, Quarantine, Turn};

mod refused;

/// One IM event waiting in a lane.
pub(super) struct LaneEvent {
    pub(super) event: Event,
    /// When its send must have started by: `publish_timeout` after the commit began.
    pub(super) start_by: Instant,
    /// The command answer it belongs to, and its place among the command's events.
    pub(super) waiting: Arc<Waiting>,
    pub(super) index: usize,
}

impl LaneEvent {
    pub(super) fn settle(&self, delivery: Delivery) {
        self.waiting.settle(self.index, delivery);
    }
}

/// A room's lane: its queue, how many of its messages are in flight, whether a lane task runs,
/// and the room's route (who sends its events: this lane or the worker).
#[derive(Default)]
pub(super) struct Lane {
    state: Mutex<LaneState>,
    pub(super) route: RoomRoute,
    /// Told when events are queued, so a task with room for another message sends them.
    pushed: Notify,
}

#[derive(Default)]
struct LaneState {
    /// The room (the IM group) of every event queued.
    room: String,
    queue: VecDeque<LaneEvent>,
    /// Messages being sent.
    in_flight: usize,
    /// Messages being sent that have not passed the rate limit yet.
    at_limit: usize,
    running: bool,
}

/// One message being sent: its events, taken off the front and topped up from the queue when
/// its permit came after a wait, and whether it passed the rate limit.
struct Flight {
    events: Mutex<Vec<LaneEvent>>,
    passed: AtomicBool,
}

type Pack = Arc<Flight>;

impl Flight {
    fn events(&self) -> std::sync::MutexGuard<'_, Vec<LaneEvent>> {
        lock(&self.events)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The front of the queue waited past its start-by time: the room is offered more than IM
/// takes now.
struct Behind;

/// What came of a message's send, for its events (those of its pack, in order).
enum Sent {
    /// IM took them all.
    Delivered,
    /// IM refused the message for its content, and the lane split it: each event's fate.
    Split(Vec<Fate>),
    /// Not sent, or failed otherwise: the room goes to the worker.
    Failed,
}

impl std::fmt::Debug for Lane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.lock();
        f.debug_struct("Lane")
            .field("queued", &state.queue.len())
            .field("in_flight", &state.in_flight)
            .field("at_limit", &state.at_limit)
            .field("running", &state.running)
            .field("route", &self.route)
            .finish()
    }
}

impl Lane {
    fn lock(&self) -> std::sync::MutexGuard<'_, LaneState> {
        lock(&self.state)
    }

    /// The room of its events.
    fn room(&self) -> String {
        self.lock().room.clone()
    }

    /// True when the lane neither holds nor sends anything.
    pub(super) fn is_idle(&self) -> bool {
        let state = self.lock();
        !state.running && state.queue.is_empty()
    }

    /// Queues `events` of `room`; true when the caller must start the lane task (none runs).
    /// Behind a lane already sending they are answered `pending` at once.
    fn queue(&self, room: &str, events: Vec<LaneEvent>) -> bool {
        let start = {
            let mut state = self.lock();
            if state.room != room {
                room.clone_into(&mut state.room);
            }
            if state.running {
                for event in &events {
                    event.settle(Delivery::Pending);
                }
            }
            state.queue.extend(events);
            !std::mem::replace(&mut state.running, true)
        };
        self.pushed.notify_one();
        start
    }

    /// True (and the task marked stopped) when nothing is queued or in flight.
    fn stop_if_idle(&self) -> bool {
        let mut state = self.lock();
        if state.queue.is_empty() && state.in_flight == 0 {
            state.running = false;
        }
        !state.running
    }

    /// Takes the next message off the front of the queue (answering what stays behind it
    /// `pending`): its pack and events, a quarantined sender's event alone. `None` when nothing
    /// is queued; [`Behind`] when the front has waited past its start-by time.
    fn next_pack(
        &self,
        limits: PackLimits,
        quarantine: &Quarantine,
    ) -> Option<Result<(Pack, Vec<Event>), Behind>> {
        let mut state = self.lock();
        let front = state.queue.front()?;
        if front.start_by < Instant::now() {
            return Some(Err(Behind));
        }
        let take = quarantine.take(limits, state.queue.iter().map(|e| ready(&e.event)));
        if take.alone {
            Quarantine::sent_alone(Path::Sync);
        }
        let count = take.events;
        let pack: Vec<LaneEvent> = state.queue.drain(..count).collect();
        for behind in &state.queue {
            behind.settle(Delivery::Pending);
        }
        state.in_flight += 1;
        state.at_limit += 1;
        let events = pack.iter().map(|e| e.event.clone()).collect();
        Some(Ok((Arc::new(Flight { events: Mutex::new(pack), passed: AtomicBool::new(false) }), events)))
    }

    /// True when another message may open: none in flight waits at the rate limit (a waiting
    /// one takes on what is queued when its permit comes; a second would split the room's
    /// events over two calls of the app-wide quota). A stack without the rate-limit layer
    /// never says a message passed, so its lane sends one message at a time.
    fn may_open(&self) -> bool {
        self.lock().at_limit == 0
    }

    /// The message of `pack` passed the rate limit (or its send ended without): the next may
    /// open.
    fn passed(&self, pack: &Flight) {
        if !pack.passed.swap(true, Ordering::AcqRel) {
            let mut state = self.lock();
            state.at_limit = state.at_limit.saturating_sub(1);
            drop(state);
            self.pushed.notify_one();
        }
    }

    /// A message is no longer in flight.
    fn sent(&self, pack: &Flight) {
        self.passed(pack);
        let mut state = self.lock();
        state.in_flight = state.in_flight.saturating_sub(1);
    }

    /// Appends to `events` (the message of `pack`) the queue's front events as far as `limits`
    /// let them in (none to a quarantined sender's message, and none from one), moving them
    /// into `pack`.
    fn top_up(&self, pack: &Pack, events: &mut Vec<Event>, limits: PackLimits, quarantine: &Quarantine) {
        let mut guard = self.lock();
        let state = &mut *guard;
        let so_far = events.iter().map(ready);
        let fits = quarantine.take(limits, so_far.chain(state.queue.iter().map(|e| ready(&e.event)))).events;
        let more = fits.saturating_sub(events.len()).min(state.queue.len());
        let mut pack = pack.events();
        for added in state.queue.drain(..more) {
            events.push(added.event.clone());
            pack.push(added);
        }
    }

    /// Everything queued, taken off the lane.
    fn take_queue(&self) -> Vec<LaneEvent> {
        self.lock().queue.drain(..).collect()
    }
}

/// What the packing reads of a ready event: its content bytes and its sender.
fn ready(event: &Event) -> (usize, Option<&str>) {
    (event.content_bytes(), event.sender.as_deref())
}

/// What every room's lane task sends with: the shared stack, the pack limits, the time
/// bounds, how many messages of a room may be in flight, and the hand-off to the worker.
pub(super) struct Lanes {
    pub(super) publisher: Publisher,
    pub(super) handoff: Arc<Handoff>,
    pub(super) pack: PackLimits,
    /// Messages of one room in flight at once (`im_batch.in_flight_per_room`, at least 1).
    pub(super) in_flight: usize,
    /// Bounds one send, its wait for a rate-limit permit included; an event not sent within it
    /// after its commit goes to the worker.
    pub(super) publish_timeout: Duration,
    /// Longest a command's answer waits for its events' first send.
    pub(super) sync_publish_wait: Duration,
    /// The senders whose events go alone, shared with the outbox worker.
    pub(super) quarantine: Arc<Quarantine>,
}

impl Lanes {
    /// Queues `events` (one batch's IM events, in order) on `lane` and starts its task when none
    /// runs.
    pub(super) fn push(self: &Arc<Self>, lane: &Arc<Lane>, room: &str, events: Vec<LaneEvent>) {
        if !events.is_empty() && lane.queue(room, events) {
            tokio::spawn(Arc::clone(self).run(Arc::clone(lane)));
        }
    }

    /// The lane task: sends messages off the front of the queue, up to `in_flight` at once
    /// (the next only once none waits at the rate limit), until nothing is queued or in
    /// flight.
    async fn run(self: Arc<Self>, lane: Arc<Lane>) {
        let mut sends = FuturesUnordered::new();
        loop {
            while sends.len() < self.in_flight.max(1) && lane.may_open() {
                if lane.route.current() == Route::Worker {
                    // The room went to the worker after these were committed for the lane.
                    self.give_up(&lane, Vec::new()).await;
                    break;
                }
                match lane.next_pack(self.pack, &self.quarantine) {
                    None => break,
                    Some(Err(Behind)) => {
                        tracing::info!(room_id = %lane.room(), "Room lane behind; the outbox worker takes the room");
                        self.give_up(&lane, Vec::new()).await;
                        break;
                    }
                    Some(Ok((pack, events))) => sends.push(self.send(&lane, pack, events)),
                }
            }
            if sends.is_empty() {
                if lane.stop_if_idle() {
                    return;
                }
                continue;
            }
            tokio::select! {
                Some((pack, sent)) = sends.next() => self.finish(&lane, &pack, sent).await,
                () = lane.pushed.notified(), if sends.len() < self.in_flight => {}
            }
        }
    }

    /// A message's send ended: its events marked delivered (those refused alone for their
    /// content parked already), or the room given to the worker with every event from the
    /// first one not delivered on.
    async fn finish(&self, lane: &Lane, pack: &Pack, sent: Sent) {
        lane.sent(pack);
        let events = std::mem::take(&mut *pack.events());
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

    /// The message's turn at the rate limit: the lane is told when it must wait; the send is
    /// not made after `publish_timeout` (a frozen process: its rows are guarded for the worker
    /// from their commit); a permit after a wait tops the pack up — only while the lane is
    /// still under the shard lease epoch the send began with; once it passes, the lane may open
    /// its next message.
    fn turn(&self, lane: &Arc<Lane>, pack: &Pack, notice: Arc<Notify>) -> Turn {
        let (limits, epoch, quarantine) = (self.pack, lane.route.epoch(), Arc::clone(&self.quarantine));
        let (refill_lane, refill_pack) = (Arc::clone(lane), Arc::clone(pack));
        let (passed_lane, passed_pack) = (Arc::clone(lane), Arc::clone(pack));
        Turn::new(
            notice,
            Instant::now() + self.publish_timeout,
            move |events| {
                if refill_lane.route.epoch() == epoch {
                    refill_lane.top_up(&refill_pack, events, limits, &quarantine);
                }
            },
            move || passed_lane.passed(&passed_pack),
        )
    }

    /// Sends one message (`events`, of `pack`) through the shared stack. Its commands are
    /// answered `pending` as soon as the stack must wait for a permit or `sync_publish_wait`
    /// has passed; the send itself (permit wait included) is bounded by `publish_timeout`. A
    /// refusal of its content splits it ([`Self::split`]).
    async fn send(&self, lane: &Arc<Lane>, pack: Pack, events: Vec<Event>) -> (Pack, Sent) {
        let Some(first_id) = events.first().map(|e| e.event_id.clone()) else {
            return (pack, Sent::Delivered);
        };
        let room = lane.room();
        let notice = Arc::new(Notify::new());
        let mut message = Message::new(room.clone(), Path::Sync, events);
        message.turn = Some(self.turn(lane, &pack, Arc::clone(&notice)));
        // A hair past the stack's own timeout, so a call that took it all is cut off (and
        // counted) there.
        let bound = self.publish_timeout + Duration::from_millis(10);
        let call = tokio::time::timeout(bound, self.publisher.clone().oneshot(message));
        tokio::pin!(call);
        let answer_by = tokio::time::sleep(self.sync_publish_wait);
        tokio::pin!(answer_by);
        let mut answered = false;
        let result = loop {
            tokio::select! {
                result = &mut call => break result,
                () = notice.notified(), if !answered => answered = true,
                () = &mut answer_by, if !answered => answered = true,
            }
            for event in pack.events().iter() {
                event.settle(Delivery::Pending);
            }
        };
        let events = pack.events().len();
        let sent = match result {
            Ok(Ok(_)) => Sent::Delivered,
            Ok(Err(error)) if is_content_refusal(error.as_ref()) => {
                tracing::info!(room_id = %room, event_id = %first_id, events, %error, "Room lane message refused for its content; splitting it");
                self.split(&pack, &room, error).await
            }
            Ok(Err(error)) => {
                let class = publish::classify(error.as_ref());
                tracing::warn!(room_id = %room, event_id = %first_id, events, class = class.as_str(), %error, "Room lane publish failed; the outbox worker takes the room");
                Sent::Failed
            }
            Err(_elapsed) => {
                tracing::warn!(room_id = %room, event_id = %first_id, events, "Room lane publish not done within publish_timeout; the outbox worker takes the room");
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
