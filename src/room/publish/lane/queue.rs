//! A room's [`Lane`]: its queue of committed IM events, its [`Window`] of messages in flight,
//! whether its task runs, and its route — the state the lane task ([`super::Lanes`]) drives.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::delivery::Quarantine;
use crate::delivery::pack::{self, PackLimits};
use crate::delivery::window::Window;
use crate::publish::{Event, Path};
use crate::room::command::outcome::Delivery;
use crate::room::publish::handoff::RoomRoute;
use crate::room::publish::waiting::Waiting;

/// One IM event waiting in a lane.
pub(in crate::room) struct LaneEvent {
    pub(in crate::room) event: Event,
    /// When its send must have started by: `publish_timeout` after the commit began.
    pub(in crate::room) start_by: Instant,
    /// The command answer it belongs to, and its place among the command's events.
    pub(in crate::room) waiting: Arc<Waiting>,
    pub(in crate::room) index: usize,
}

impl LaneEvent {
    pub(in crate::room) fn settle(&self, delivery: Delivery) {
        self.waiting.settle(self.index, delivery);
    }
}

/// A room's lane: its queue, how many of its messages are in flight, whether a lane task runs,
/// and the room's route (who sends its events: this lane or the worker).
#[derive(Default)]
pub(in crate::room) struct Lane {
    state: Mutex<LaneState>,
    pub(in crate::room) route: RoomRoute,
    /// Told when events are queued, so a task with room for another message sends them.
    pub(super) pushed: Notify,
}

#[derive(Default)]
struct LaneState {
    /// The room (the IM group) of every event queued.
    room: String,
    queue: VecDeque<LaneEvent>,
    /// The room's messages in flight.
    window: Window,
    running: bool,
}

/// A message opened in the window, before its permit: the shard lease epoch it opened under,
/// and how many events were queued then.
pub(super) struct Opened {
    epoch: u64,
    queued: usize,
}

pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The front of the queue waited past its start-by time: the room is offered more than IM
/// takes now.
pub(super) struct Behind;

impl std::fmt::Debug for Lane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.lock();
        f.debug_struct("Lane")
            .field("queued", &state.queue.len())
            .field("window", &state.window)
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
    pub(super) fn room(&self) -> String {
        self.lock().room.clone()
    }

    /// True when the lane neither holds nor sends anything.
    pub(in crate::room) fn is_idle(&self) -> bool {
        let state = self.lock();
        !state.running && state.queue.is_empty()
    }

    /// Queues `events` of `room`; true when the caller must start the lane task (none runs).
    /// Behind a lane already sending they are answered `pending` at once.
    pub(super) fn queue(&self, room: &str, events: Vec<LaneEvent>) -> bool {
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
    pub(super) fn stop_if_idle(&self) -> bool {
        let mut state = self.lock();
        if state.queue.is_empty() && state.window.is_empty() {
            state.running = false;
        }
        !state.running
    }

    /// True when another message may open: fewer than `k` in flight, and none waiting for its
    /// permit (a waiting one packs what is queued when its permit comes; a second would split
    /// the room's events over two calls of the app-wide quota).
    /// A group call at the front opens only into an empty window.
    pub(super) fn may_open(&self, k: usize) -> bool {
        let state = self.lock();
        let group_call = state.queue.front().is_some_and(|e| e.event.admin.is_some());
        state.window.may_open_for(k, true, group_call)
    }

    /// Opens the next message in the window. `None` when nothing is queued; [`Behind`] when
    /// the front has waited past its start-by time.
    pub(super) fn open(&self) -> Option<Result<Opened, Behind>> {
        let mut state = self.lock();
        let front = state.queue.front()?;
        if front.start_by < Instant::now() {
            return Some(Err(Behind));
        }
        state.window.open();
        Some(Ok(Opened { epoch: self.route.epoch(), queued: state.queue.len() }))
    }

    /// Answers every queued command `pending`: the next message waits for its permit.
    pub(super) fn settle_queued(&self) {
        for event in &self.lock().queue {
            event.settle(Delivery::Pending);
        }
    }

    /// True when the next event to send is a call that sends no message (a room's creation,
    /// always sent alone): it takes its API's permit only — fairly between owners — and none of
    /// the messages' (docs/DESIGN.md, "Fair group creation").
    pub(super) fn head_is_call_alone(&self) -> bool {
        self.lock().queue.front().and_then(|e| e.event.admin.as_ref()).is_some_and(|call| !call.after_message)
    }

    /// The message `opened` has its permit: its pack, taken off the front of the queue by the
    /// packer — under another epoch than it opened under, only of what was queued then — and
    /// what stays behind it answered `pending`. The next message may open.
    pub(super) fn take_pack(
        &self,
        opened: &Opened,
        limits: PackLimits,
        quarantine: &Quarantine,
    ) -> Vec<LaneEvent> {
        let pack: Vec<LaneEvent> = {
            let mut state = self.lock();
            state.window.passed();
            let ours = if self.route.epoch() == opened.epoch { usize::MAX } else { opened.queued };
            let front = state.queue.iter().take(ours).map(|e| &e.event);
            let count = pack::next_pack(limits, quarantine, Path::Sync, front);
            let pack: Vec<LaneEvent> = state.queue.drain(..count).collect();
            if pack.iter().any(|e| e.event.admin.is_some()) {
                state.window.open_barrier();
            }
            for behind in &state.queue {
                behind.settle(Delivery::Pending);
            }
            pack
        };
        self.pushed.notify_one();
        pack
    }

    /// The message `opened` gave up waiting for its permit: the next may open.
    pub(super) fn no_permit(&self) {
        self.lock().window.passed();
        self.pushed.notify_one();
    }

    /// A message is no longer in flight.
    pub(super) fn sent(&self) {
        self.lock().window.close();
    }

    /// Everything queued, taken off the lane.
    pub(super) fn take_queue(&self) -> Vec<LaneEvent> {
        self.lock().queue.drain(..).collect()
    }
}
