//! The hand-off of a room's IM events between its lane and the outbox worker (SPEC §12.1,
//! §13.1), in one place: who sends the room's events next ([`Route`], one per cell in its
//! [`RoomRoute`]), and the steps that move a room from one to the other ([`Handoff`]).
//!
//! - **Lane.** The room's lane sends its events right after their commit, in room order; their
//!   rows are committed with a claim guard ([`Handoff::claim_after`]) the worker respects, so
//!   the two never send the same row at once.
//! - **Worker.** The room's rows are committed claimable at once (no hand-off statement per
//!   batch) and the worker sends them, in order, by its policy.
//!
//! A room starts on the worker's route: a fresh cell does not know what earlier processes left
//! undelivered. It goes to the worker when the lane cannot keep its promises (a send failed, or
//! the oldest queued event waited `publish_timeout`: [`Handoff::give_to_worker`] makes what the
//! lane held claimable at once, after the marks of what went through, and wakes the worker),
//! when the cell unloads, and when the room's shard lease epoch changes (the room may have moved
//! away and back: another owner's rows may be undelivered). It comes back to the lane once the
//! database shows nothing of the room undelivered, checked before a commit at most every
//! [`ORDER_CHECK_EVERY`] ([`Handoff::route_for_commit`]): every earlier commit is in the
//! database then, so the worker holds nothing of the room.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use super::marker::DeliveryMarker;
use crate::domain::RoomId;
use crate::store::SharedCommandStore;

/// How often, at most, a room on the worker's route asks the database whether it may go back
/// to its lane.
pub(in crate::room) const ORDER_CHECK_EVERY: Duration = Duration::from_millis(250);

/// Added to twice `publish_timeout` for the claim guard of a lane's rows: the lane starts
/// sending an event within one `publish_timeout` of its commit, and the send ends within
/// another.
const CLAIM_MARGIN: Duration = Duration::from_secs(1);

/// Who sends a room's IM events next.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(in crate::room) enum Route {
    /// The room's lane, right after commit; the rows are guarded from the worker meanwhile.
    Lane,
    /// The outbox worker; the rows are claimable at once.
    #[default]
    Worker,
}

/// A room's route, and the shard lease epoch the room is served under (a new epoch sends the
/// room to the worker's route); one per cell.
#[derive(Debug, Default)]
pub(in crate::room) struct RoomRoute {
    state: Mutex<RouteState>,
    /// 0 without a cluster.
    epoch: AtomicU64,
}

#[derive(Debug, Default)]
struct RouteState {
    route: Route,
    /// No order check before this (after one found the room still the worker's).
    next_check: Option<Instant>,
}

impl RoomRoute {
    fn lock(&self) -> std::sync::MutexGuard<'_, RouteState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Who sends the room's events now.
    pub(in crate::room) fn current(&self) -> Route {
        self.lock().route
    }

    /// The room's events go to the worker until an order check gives them back to the lane.
    pub(in crate::room) fn to_worker(&self) {
        self.lock().route = Route::Worker;
    }

    /// The shard lease epoch the room is served under.
    pub(in crate::room) fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    /// Records that the room is served under `epoch`; true when that is a new one (the caller
    /// unloads the cell, which sends the room to the worker).
    pub(in crate::room) fn enter_epoch(&self, epoch: u64) -> bool {
        self.epoch.swap(epoch, Ordering::AcqRel) != epoch
    }

    /// True when an order check may run now (and none may for [`ORDER_CHECK_EVERY`]).
    fn check_due(&self) -> bool {
        let mut state = self.lock();
        let now = Instant::now();
        if state.next_check.is_some_and(|at| now < at) {
            return false;
        }
        state.next_check = Some(now + ORDER_CHECK_EVERY);
        true
    }

    fn to_lane(&self) {
        let mut state = self.lock();
        state.route = Route::Lane;
        state.next_check = None;
    }
}

/// The steps of the hand-off shared by every room: the order check, the claim guard, the
/// delivery marks and the release of what a lane gives up.
pub(in crate::room) struct Handoff {
    repo: SharedCommandStore,
    marker: DeliveryMarker,
    /// The claim guard of rows committed on the lane's route.
    lane_claim_after: Duration,
    worker_wake: Option<Arc<Notify>>,
}

impl Handoff {
    /// The hand-off over `repo`, with lane sends bounded by `publish_timeout`; starts its
    /// delivery marker task (so it must be called inside a Tokio runtime) and wakes
    /// `worker_wake` when it gives events to the worker.
    pub(in crate::room) fn new(
        repo: SharedCommandStore,
        publish_timeout: Duration,
        worker_wake: Option<Arc<Notify>>,
    ) -> Self {
        let marker = DeliveryMarker::spawn(repo.clone());
        Self { repo, marker, lane_claim_after: publish_timeout * 2 + CLAIM_MARGIN, worker_wake }
    }

    /// The delivery marker the lanes' successes go to.
    pub(in crate::room) fn marker(&self) -> &DeliveryMarker {
        &self.marker
    }

    /// How long the rows of a batch committed on `route` are not claimable by the worker.
    pub(in crate::room) fn claim_after(&self, route: Route) -> Duration {
        match route {
            Route::Lane => self.lane_claim_after,
            Route::Worker => Duration::ZERO,
        }
    }

    /// The route of the batch about to commit on `room` (asked by its drain task before each
    /// commit, under the cell's lock): the current one, or the lane's again once the database
    /// shows nothing of the room undelivered (asked at most every [`ORDER_CHECK_EVERY`]).
    pub(in crate::room) async fn route_for_commit(&self, room: &RoomId, route: &RoomRoute) -> Route {
        if route.current() == Route::Lane {
            return Route::Lane;
        }
        if !route.check_due() {
            return Route::Worker;
        }
        match self.repo.has_undelivered(room.as_str()).await {
            Ok(false) => {
                route.to_lane();
                Route::Lane
            }
            Ok(true) => Route::Worker,
            Err(error) => {
                tracing::warn!(room_id = %room, %error, "Room order check failed; leaving events to the worker");
                Route::Worker
            }
        }
    }

    /// Marks `event_ids` delivered (best effort, batched with other commands' marks).
    pub(in crate::room) fn delivered(&self, event_ids: Vec<String>) {
        self.marker.submit(event_ids);
    }

    /// Parks the lane's event `event_id`, which IM refused alone for its content: `failed`
    /// with `reason` and `error`, fenced on its row's claim guard (no worker holds it). False
    /// when it could not (the guard passed, the database failed): the worker takes it then.
    pub(in crate::room) async fn park(&self, event_id: &str, reason: &str, error: &str) -> bool {
        match self.repo.park_pending(event_id, reason, error).await {
            Ok(parked) => parked,
            Err(store_error) => {
                tracing::warn!(event_id, error = %store_error, "Could not park a refused event; the outbox worker takes it");
                false
            }
        }
    }

    /// Guards the lane's fresh rows of `event_ids` again, as long as at their commit, fenced on
    /// their current guard: the time by which a send of theirs must start, as for events just
    /// committed (`publish_timeout` from before the write). `None` when any of them is no
    /// longer the lane's (or the database failed): the worker takes them then.
    pub(in crate::room) async fn extend_guard(
        &self,
        event_ids: &[String],
        publish_timeout: Duration,
    ) -> Option<Instant> {
        let asked = Instant::now();
        match self.repo.extend_guard(event_ids, self.lane_claim_after).await {
            Ok(extended) if extended == event_ids.len() as u64 => Some(asked + publish_timeout),
            Ok(_) => None,
            Err(error) => {
                tracing::warn!(events = event_ids.len(), %error, "Could not extend the lane's claim guard; the outbox worker takes the events");
                None
            }
        }
    }

    /// Gives `event_ids` (the room is on the worker's route already) to the worker: claimable
    /// at once, after the marks of the earlier ones are written (so the worker sees those
    /// delivered), and the worker woken.
    pub(in crate::room) async fn give_to_worker(&self, event_ids: Vec<String>) {
        if event_ids.is_empty() {
            return;
        }
        self.marker.flush().await;
        if let Err(error) = self.repo.release_pending(&event_ids).await {
            tracing::warn!(events = event_ids.len(), %error, "Could not release pending events; the worker takes them after their guard");
        }
        self.wake_worker();
    }

    /// Wakes the worker: rows claimable at once are waiting.
    pub(in crate::room) fn wake_worker(&self) {
        if let Some(wake) = &self.worker_wake {
            wake.notify_one();
        }
    }
}
