//! A room's publish lane (SPEC §12.1): the one place on the room's owner that sends the room's
//! IM events, in `room_version` order, packing whatever of the room is ready when it sends.
//!
//! The drain task pushes each committed batch's IM events onto its cell's lane and goes on
//! committing. One lane task per room at a time takes the ready events from the front — up to
//! `im_batch` — and sends them as one message through the shared stack (path `sync`), which
//! waits for the rate-limit permits. When the permit comes after a wait, the message takes on
//! the events committed meanwhile (its [`Refill`]), up to `im_batch`: a room's turn under a busy
//! quota carries whatever of the room is ready at that turn, not what was ready when it began
//! waiting. The busier the room (or the app), the more each call carries; an idle room sends
//! each event at once. Events the filter answers without a call
//! never enter the lane (see [`super::sync_publish`]).
//!
//! A command waits for its own events only while their send can happen at once: when its
//! events are in the pack being sent, until the stack says it must wait for a permit, and
//! never longer than `rooms.sync_publish_wait`. Events queued behind a pack in flight answer
//! `pending` at once; the lane sends them moments later.
//!
//! The lane gives the room to the outbox worker when it cannot keep its promises: a send failed
//! (the worker retries by policy), or the oldest queued event has waited `publish_timeout`
//! (the room is offered more than IM takes, or the app-wide quota is behind). Its queue is
//! made claimable at once and the worker woken; the cell is no longer `sync_clear`, so the
//! room's next commits write their rows claimable at once (no hand-off statement per batch),
//! and the lane takes the room back once the database shows nothing of it undelivered
//! (checked before a commit, at most every [`ORDER_CHECK_EVERY`]).

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;
use tower::ServiceExt;

use super::cells::Cell;
use super::outcome::Delivery;
use super::sync_publish::{SyncPublish, Waiting};
use crate::domain::RoomId;
use crate::publish::{self, Event, Message, Path, Refill};

/// How often, at most, a lane that gave its room to the worker asks the database whether it
/// may take it back.
pub(super) const ORDER_CHECK_EVERY: Duration = Duration::from_millis(250);

/// One IM event waiting in a lane.
pub(super) struct LaneEvent {
    pub(super) event: Event,
    /// When its send must have started by: `publish_timeout` after the commit.
    pub(super) start_by: Instant,
    /// The command answer it belongs to, and its place among the command's events.
    pub(super) waiting: Arc<Waiting>,
    pub(super) index: usize,
}

impl LaneEvent {
    fn settle(&self, delivery: Delivery) {
        self.waiting.settle(self.index, delivery);
    }
}

/// The lane of one cell: its queue and whether a lane task runs.
#[derive(Default)]
pub(super) struct Lane {
    state: Mutex<LaneState>,
}

#[derive(Default)]
struct LaneState {
    /// The room (the IM group) of every event queued.
    room: String,
    queue: VecDeque<LaneEvent>,
    /// The pack being sent: taken off the front, and topped up from the queue when its
    /// permit came after a wait.
    sending: Vec<LaneEvent>,
    running: bool,
    /// No order check before this (after one found the room still the worker's).
    next_check: Option<Instant>,
}

impl std::fmt::Debug for Lane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.lock();
        f.debug_struct("Lane").field("queued", &state.queue.len()).field("running", &state.running).finish()
    }
}

impl Lane {
    fn lock(&self) -> std::sync::MutexGuard<'_, LaneState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
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

    /// Settles every event of the pack being sent `pending`.
    fn sending_pending(&self) {
        for event in &self.lock().sending {
            event.settle(Delivery::Pending);
        }
    }

    /// The pack being sent, as it went (after any top-up).
    fn take_sending(&self) -> Vec<LaneEvent> {
        std::mem::take(&mut self.lock().sending)
    }
}

impl SyncPublish {
    /// Queues `events` (one batch's IM events, in order) on the cell's lane and starts its task
    /// when none runs. Behind a lane already sending they are answered `pending` at once.
    pub(super) fn push(self: &Arc<Self>, cell: &Arc<Cell>, room: &str, events: Vec<LaneEvent>) {
        if events.is_empty() {
            return;
        }
        let start = {
            let mut state = cell.lane.lock();
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
        if start {
            let (service, cell) = (Arc::clone(self), Arc::clone(cell));
            tokio::spawn(async move { service.run_lane(cell).await });
        }
    }

    /// The lane task: sends packs off the front of the queue until it is empty.
    async fn run_lane(self: Arc<Self>, cell: Arc<Cell>) {
        loop {
            {
                let mut state = cell.lane.lock();
                if state.queue.is_empty() {
                    state.running = false;
                    return;
                }
            }
            if !cell.sync_clear.load(Ordering::Acquire) {
                // The room went to the worker after these were committed for the lane.
                self.give_up(&cell, Vec::new()).await;
                continue;
            }
            let Some(events) = self.next_pack(&cell) else {
                // Waited too long: the room is offered more than IM takes now.
                tracing::info!(room_id = %cell.lane.room(), "Room lane behind; the outbox worker takes the room");
                self.give_up(&cell, Vec::new()).await;
                continue;
            };
            let sent = self.send(&cell, events).await;
            let pack = cell.lane.take_sending();
            match sent {
                Ok(()) => {
                    self.marker.submit(pack.iter().map(|e| e.event.event_id.clone()).collect());
                    for event in &pack {
                        event.settle(Delivery::Delivered);
                    }
                }
                Err(()) => self.give_up(&cell, pack).await,
            }
        }
    }

    /// Takes the next pack off the front of the queue as the pack being sent (answering what
    /// stays behind it `pending`) and returns its events, or `None` when the front has waited
    /// past its start-by time.
    fn next_pack(&self, cell: &Cell) -> Option<Vec<Event>> {
        let mut state = cell.lane.lock();
        if state.queue.front().is_some_and(|e| e.start_by < Instant::now()) {
            return None;
        }
        let count = self.pack.take(state.queue.iter().map(|e| e.event.content_bytes()));
        let pack: Vec<LaneEvent> = state.queue.drain(..count).collect();
        for behind in &state.queue {
            behind.settle(Delivery::Pending);
        }
        let events = pack.iter().map(|e| e.event.clone()).collect();
        state.sending = pack;
        Some(events)
    }

    /// The top-up of a pack whose permit came after a wait: the queue's front events (committed
    /// meanwhile, already answered `pending`) as far as the pack limits let them in — only
    /// while the cell is still under the shard lease `epoch` the send started with (under
    /// another, the room may have moved and come back: its queue is not this send's).
    fn refill(&self, cell: &Arc<Cell>, epoch: u64) -> Refill {
        let (cell, limits) = (Arc::clone(cell), self.pack);
        Refill::new(move |events| {
            if cell.epoch() != epoch {
                return;
            }
            let mut guard = cell.lane.lock();
            let state = &mut *guard;
            let sizes = events.iter().map(Event::content_bytes);
            let fits = limits.take(sizes.chain(state.queue.iter().map(|e| e.event.content_bytes())));
            let more = fits.saturating_sub(events.len()).min(state.queue.len());
            for added in state.queue.drain(..more) {
                events.push(added.event.clone());
                state.sending.push(added);
            }
        })
    }

    /// Sends one pack through the shared stack. Its commands are answered `pending` as soon
    /// as the stack must wait for a permit or `sync_publish_wait` has passed; the send itself
    /// (permit wait included) is bounded by `publish_timeout`.
    async fn send(&self, cell: &Arc<Cell>, events: Vec<Event>) -> Result<(), ()> {
        let Some(first_id) = events.first().map(|e| e.event_id.clone()) else { return Ok(()) };
        let room = cell.lane.room();
        let notice = Arc::new(Notify::new());
        let mut message = Message::new(room.clone(), Path::Sync, events);
        message.on_wait = Some(Arc::clone(&notice));
        message.refill = Some(self.refill(cell, cell.epoch()));
        // Its rows are guarded for the worker from their commit; a call that has not started
        // within publish_timeout (a frozen process) is not made.
        message.call_by = Some(Instant::now() + self.publish_timeout);
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
            cell.lane.sending_pending();
        };
        match result {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(error)) => {
                let class = publish::classify(error.as_ref());
                let events = cell.lane.lock().sending.len();
                tracing::warn!(room_id = %room, event_id = %first_id, events, class = class.as_str(), %error, "Room lane publish failed; the outbox worker takes the room");
                Err(())
            }
            Err(_elapsed) => {
                let events = cell.lane.lock().sending.len();
                tracing::warn!(room_id = %room, event_id = %first_id, events, "Room lane publish not done within publish_timeout; the outbox worker takes the room");
                Err(())
            }
        }
    }

    /// Whether the lane sends the IM events of the batch about to commit on `room` (the drain
    /// task asks before each commit, under the cell's lock): yes while the cell is
    /// `sync_clear`; after the lane gave the room to the worker, once the database shows
    /// nothing of the room undelivered (asked at most every [`ORDER_CHECK_EVERY`]; every
    /// earlier commit is in the database, so the worker holds nothing of the room then).
    /// Otherwise the batch's rows are committed claimable at once, for the worker.
    pub(super) async fn lane_owns(&self, room: &RoomId, cell: &Cell) -> bool {
        if cell.sync_clear.load(Ordering::Acquire) {
            return true;
        }
        {
            let mut state = cell.lane.lock();
            let now = Instant::now();
            if state.next_check.is_some_and(|at| now < at) {
                return false;
            }
            state.next_check = Some(now + ORDER_CHECK_EVERY);
        }
        let caught_up = match self.repo.has_undelivered(room.as_str()).await {
            Ok(undelivered) => !undelivered,
            Err(error) => {
                tracing::warn!(room_id = %room, %error, "Room order check failed; leaving events to the worker");
                false
            }
        };
        if caught_up {
            cell.sync_clear.store(true, Ordering::Release);
            cell.lane.lock().next_check = None;
        }
        caught_up
    }

    /// Gives the room to the worker: `unsent` and everything queued are answered `pending`,
    /// made claimable at once (after the marks of what went through are written, so the worker
    /// sees those delivered), and the worker is woken.
    async fn give_up(&self, cell: &Cell, unsent: Vec<LaneEvent>) {
        cell.sync_clear.store(false, Ordering::Release);
        let queued: Vec<LaneEvent> = cell.lane.lock().queue.drain(..).collect();
        let events: Vec<LaneEvent> = unsent.into_iter().chain(queued).collect();
        for event in &events {
            event.settle(Delivery::Pending);
        }
        let ids: Vec<String> = events.iter().map(|e| e.event.event_id.clone()).collect();
        self.hand_to_worker(ids).await;
    }
}
