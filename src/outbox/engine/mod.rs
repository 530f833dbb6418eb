//! The worker's engine: claimed rows flow into per-room queues, each room publishes its rows
//! one after another (one spawned task per row, rooms in parallel up to `max_in_flight`), and
//! the results are marked in buffered, fenced writes at least every [`MARK_INTERVAL`].
//!
//! ```text
//! claim by room (when the rows held fall to the low-water mark) ─▶ room queues
//!   ─▶ publish tasks (each room in order; the stack waits for rate-limit permits)
//!   ─▶ marks buffer ─(every 250 ms, and before each claim)─▶ finish_claimed per claim
//!   lease renewal every lease/4 for every claim still holding rows
//! ```
//!
//! Per-room order: a claimed row is published only behind every earlier undelivered row of its
//! room. The claim takes a room's oldest undelivered rows, from its head, or the rows right
//! behind the ones this worker holds (queued here in memory, published first); a room whose
//! head is held elsewhere, or not yet due, gets nothing. A failed row defers the rest of its
//! room's queue behind it, so a stuck room holds back only its own events.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use futures::FutureExt;

use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

mod claim;
mod failures;
mod marks;
mod publish;

use super::{BatchReport, OutboxWorker, WORKER_NAME};
use crate::delivery::action;
use crate::delivery::codec::decode;
use crate::delivery::groups::Groups;
use crate::delivery::pack::{self, Ready};
use crate::delivery::window::Window;
use crate::publish::Event;
use crate::publish::{BoxError, Path};
use crate::store::{Mark, OutboxRow, StoreError};
use crate::telemetry::names;

/// Results are written at least this often while rows are in flight.
pub(super) const MARK_INTERVAL: Duration = Duration::from_millis(250);

/// One claimed row, the claim holding it, and its event as decoded once when it was claimed
/// (carrying the IM group call of [`Groups::attach`]): the one the packer reads and the
/// publish sends, or why the envelope could not be decoded.
pub(super) struct Held {
    worker_id: String,
    row: OutboxRow,
    event: Result<Event, String>,
}

impl Held {
    /// `row` of the claim `worker_id`, its event carrying the calls of `groups`.
    fn new(worker_id: String, row: OutboxRow, groups: Groups) -> Self {
        let event = decode(&row).map(|mut event| {
            groups.attach(&mut event);
            event
        });
        Self { worker_id, row, event }
    }

    /// True when its event carries an IM group call.
    fn group_call(&self) -> bool {
        self.event.as_ref().is_ok_and(|e| e.admin.is_some())
    }
}

impl Ready for Held {
    fn event_type(&self) -> &str {
        &self.row.event_type
    }

    fn content_bytes(&self) -> usize {
        pack::content_bytes(&self.row.envelope, &self.row.event_type)
    }

    fn sender(&self) -> Option<&str> {
        self.event.as_ref().ok()?.sender.as_deref()
    }

    fn seated(&self) -> &[std::sync::Arc<str>] {
        self.event.as_ref().map_or(&[], |e| &e.seated)
    }

    fn group_call(&self) -> bool {
        Held::group_call(self)
    }
}

/// A finished publish task: each row it published, in order, and what came of it.
struct Done {
    results: Vec<(Held, Result<(), Outcome>)>,
}

/// Why a publish task did not deliver.
enum Outcome {
    Failed(BoxError),
    Undecodable(String),
}

/// The engine's state; one per worker run.
pub(super) struct Engine {
    worker: OutboxWorker,
    /// Rows each live claim still holds (queued, in flight, or waiting to be marked).
    claims: HashMap<String, usize>,
    /// When each live claim's lease ends at the latest, on this process's monotonic clock:
    /// measured from before the claim (or renewal) was asked for, so never later than the
    /// database's `lock_until`. A process frozen past it (SIGSTOP, a long pause) learns on
    /// waking that its rows may be someone else's, and publishes none of the queued ones.
    leases: HashMap<String, Instant>,
    queues: HashMap<String, VecDeque<Held>>,
    /// Where the next claim's round robin over the rooms starts.
    cursor: String,
    /// Rooms with queued rows and fewer than `in_flight_per_room` messages in flight, in
    /// arrival order (a room may be listed twice; a pop re-checks).
    ready: VecDeque<String>,
    /// Each room's messages in flight (rooms with none are not listed).
    busy: HashMap<String, Window>,
    tasks: JoinSet<Done>,
    marks: Vec<(Held, Mark)>,
    paused_until: Option<Instant>,
    pub(super) report: BatchReport,
}

impl Engine {
    pub(super) fn new(worker: OutboxWorker) -> Self {
        Self {
            worker,
            claims: HashMap::new(),
            leases: HashMap::new(),
            queues: HashMap::new(),
            cursor: String::new(),
            ready: VecDeque::new(),
            busy: HashMap::new(),
            tasks: JoinSet::new(),
            marks: Vec::new(),
            paused_until: None,
            report: BatchReport::default(),
        }
    }

    /// Rows held: queued, in flight, or done but not yet marked.
    pub(super) fn held(&self) -> usize {
        self.claims.values().sum()
    }

    /// Rows held that are not done yet: queued or in flight (a claim writes the marks of the
    /// done ones first).
    pub(super) fn unfinished(&self) -> usize {
        self.held().saturating_sub(self.marks.len())
    }

    /// True while publishing is paused after a configuration error.
    pub(super) fn paused(&mut self) -> Option<Instant> {
        if let Some(until) = self.paused_until
            && Instant::now() >= until
        {
            self.paused_until = None;
            metrics::gauge!(names::OUTBOX_PUBLISH_PAUSED, names::LABEL_REASON => "configuration").set(0.0);
            tracing::info!(worker = WORKER_NAME, node_id = %self.worker.node_id, "Outbox publishing resumed");
        }
        self.paused_until
    }

    /// Starts the next message of ready rooms while fewer than `max_in_flight` publish, each
    /// room with at most `in_flight_per_room` messages out.
    pub(super) fn start(&mut self) {
        while self.tasks.len() < self.worker.options.max_in_flight.max(1) {
            let Some(room) = self.ready.pop_front() else { return };
            if !self.has_room_for_another(&room) {
                continue;
            }
            let Some(head) = self.queues.get(&room).and_then(VecDeque::front) else { continue };
            if !self.lease_outlasts_a_publish(&head.worker_id) {
                // The lease may end before the publish does (or has ended: this process was
                // frozen past it): another worker may own the row now. Hand it back instead of
                // sending it a second time (the fenced mark changes nothing if the lease is
                // gone), and the room's later rows with it, whatever claim they came in: none
                // of them may overtake it.
                let handed_back = self.queues.remove(&room).unwrap_or_default();
                self.report.stale += handed_back.len() as u64;
                self.marks
                    .extend(handed_back.into_iter().map(|h| (h, Mark::Defer { after: Duration::ZERO })));
                continue;
            }
            let Some(queue) = self.queues.get_mut(&room) else { continue };
            let count = pack::next_pack(self.worker.pack, &self.worker.quarantine, Path::Worker, &*queue);
            let pack: Vec<Held> = queue.drain(..count).collect();
            if queue.is_empty() {
                // Forget drained rooms: the map holds only rooms with rows waiting.
                self.queues.remove(&room);
            }
            let window = self.busy.entry(room.clone()).or_default();
            window.open();
            if pack.iter().any(Held::group_call) {
                window.open_barrier();
            }
            if self.has_room_for_another(&room) && self.queues.contains_key(&room) {
                // Pipelined: the room's next message may start beside this one.
                self.ready.push_back(room);
            }
            let worker = self.worker.clone();
            self.tasks.spawn(async move {
                // A panic below becomes a failed attempt: every row is always marked, and its
                // claim always ends (a lost row would have its lease renewed forever).
                let publish = std::panic::AssertUnwindSafe(worker.publish_pack(&pack)).catch_unwind();
                let results = publish.await.unwrap_or_else(|_| {
                    pack.iter().map(|_| Err(Outcome::Failed("publish task panicked".into()))).collect()
                });
                Done { results: pack.into_iter().zip(results).collect() }
            });
        }
    }

    /// Abandons the publishes in flight (their rows come back after their lease).
    pub(super) fn abort(&mut self) {
        self.tasks.abort_all();
    }

    /// True when a publish is in flight.
    pub(super) fn publishing(&self) -> bool {
        !self.tasks.is_empty()
    }

    /// Waits for the next publish to finish and records it. Pending forever when none runs.
    pub(super) async fn next_done(&mut self) {
        let Some(joined) = self.tasks.join_next().await else {
            return std::future::pending().await;
        };
        let Ok(Done { results }) = joined else {
            // Only an abort ends a task without its `Done` (panics are caught inside it).
            tracing::error!(worker = WORKER_NAME, node_id = %self.worker.node_id, "Outbox publish task aborted");
            return;
        };
        let Some(room) = results.first().map(|(held, _)| held.row.room_id.clone()) else { return };
        let was_full = !self.has_room_for_another(&room);
        if let Some(window) = self.busy.get_mut(&room) {
            window.close();
            if window.is_empty() {
                self.busy.remove(&room);
            }
        }
        for (held, result) in results {
            match result {
                Ok(()) => self.marks.push((held, Mark::Delivered)),
                Err(Outcome::Undecodable(error)) => {
                    self.report.undecodable += 1;
                    self.log_row(
                        tracing::Level::ERROR,
                        &held.row,
                        "failed",
                        &error,
                        "Undecodable outbox envelope parked for inspection",
                    );
                    self.marks.push((held, Mark::Park { reason: action::UNDECODABLE, error }));
                }
                Err(Outcome::Failed(error)) => self.failed(held, error),
            }
        }
        // A room that had no slot free is listed again (one with a slot free is listed already).
        if was_full && self.queues.get(&room).is_some_and(|q| !q.is_empty()) {
            self.ready.push_back(room);
        }
    }

    /// True when `room` has fewer than `in_flight_per_room` messages in flight.
    /// A group call at the front of its queue opens only into an empty window.
    fn has_room_for_another(&self, room: &str) -> bool {
        let group_call = self.queues.get(room).and_then(VecDeque::front).is_some_and(Held::group_call);
        // The worker's packs are taken before their permits, so none gathers at the permit step.
        self.busy
            .get(room)
            .is_none_or(|window| window.may_open_for(self.worker.in_flight_per_room, false, group_call))
    }
}

/// Runs the engine for one claim until every row of it is published and marked (the
/// zero2prod-style single iteration tests call).
pub(super) async fn run_once(
    worker: &OutboxWorker,
    cancel: &CancellationToken,
) -> Result<BatchReport, StoreError> {
    let mut engine = Engine::new(worker.clone());
    engine.claim().await?;
    let mut flush = tokio::time::interval(MARK_INTERVAL);
    let mut renew = tokio::time::interval(worker.options.lease() / 4);
    let mut cancelled = false;
    loop {
        engine.start();
        if !engine.publishing() {
            break;
        }
        tokio::select! {
            () = cancel.cancelled(), if !cancelled => {
                cancelled = true;
                engine.release_queued();
            }
            () = engine.next_done() => {}
            _ = flush.tick() => {
                engine.flush().await;
            }
            _ = renew.tick() => engine.renew().await,
        }
    }
    if cancel.is_cancelled() {
        engine.release_queued();
    }
    engine.flush().await;
    Ok(engine.report)
}

/// The bounded label of a stored event type name.
fn event_type_label(name: &str) -> &'static str {
    name.parse::<crate::domain::EventType>().map_or("unknown", |t| t.as_str())
}

#[cfg(test)]
mod tests;
