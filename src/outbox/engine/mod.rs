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
use futures::future::BoxFuture;
use rand::Rng;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

mod claim;
mod marks;

use super::{BatchReport, OutboxWorker, WORKER_NAME};
use crate::delivery::action::{self, Action, Failure, on_failure};
use crate::delivery::codec::decode;
use crate::delivery::pack::{self, Ready};
use crate::delivery::split::{self, Fate, Resend, SharedError};
use crate::delivery::window::Window;
use crate::publish::{BoxError, Event, Message, Path};
use crate::store::{Mark, OutboxRow, StoreError};
use crate::telemetry::names;

/// Results are written at least this often while rows are in flight.
pub(super) const MARK_INTERVAL: Duration = Duration::from_millis(250);

/// One claimed row and the claim holding it.
pub(super) struct Held {
    worker_id: String,
    row: OutboxRow,
    /// Whose content its event carries ([`Event::sender`]), read when it was claimed.
    sender: Option<std::sync::Arc<str>>,
}

impl Held {
    /// `row` of the claim `worker_id`.
    fn new(worker_id: String, row: OutboxRow) -> Self {
        let sender = decode(&row).ok().and_then(|event| event.sender);
        Self { worker_id, row, sender }
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
        self.sender.as_deref()
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
            self.busy.entry(room.clone()).or_default().open();
            if self.has_room_for_another(&room) && self.queues.contains_key(&room) {
                // Pipelined: the room's next message may start beside this one.
                self.ready.push_back(room);
            }
            let worker = self.worker.clone();
            self.tasks.spawn(async move {
                // A panic below becomes a failed attempt: every row is always marked, and its
                // claim always ends (a lost row would have its lease renewed forever).
                let rows: Vec<&OutboxRow> = pack.iter().map(|h| &h.row).collect();
                let publish = std::panic::AssertUnwindSafe(worker.publish_pack(&rows)).catch_unwind();
                let results = publish.await.unwrap_or_else(|_| {
                    rows.iter().map(|_| Err(Outcome::Failed("publish task panicked".into()))).collect()
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
    fn has_room_for_another(&self, room: &str) -> bool {
        // The worker's packs are taken before their permits, so none gathers at the permit step.
        self.busy.get(room).is_none_or(|window| window.may_open(self.worker.in_flight_per_room, false))
    }

    fn failed(&mut self, held: Held, error: BoxError) {
        let jitter = rand::rng().random_range(0.5..=1.0);
        let options = &self.worker.options;
        let (mark, hold_room) = match on_failure(options, held.row.retry_count, error.as_ref(), jitter) {
            Failure::Mark(mark @ Mark::Park { .. }) => (mark, None),
            Failure::Mark(mark @ (Mark::Retry { after, .. } | Mark::Defer { after })) => (mark, Some(after)),
            Failure::Mark(Mark::Delivered) => (Mark::Delivered, None),
            Failure::ConfigPause { error } => {
                let pause = options.config_error_pause;
                if self.paused_until.is_none() {
                    metrics::gauge!(names::OUTBOX_PUBLISH_PAUSED, names::LABEL_REASON => "configuration")
                        .set(1.0);
                    tracing::error!(worker = WORKER_NAME, node_id = %self.worker.node_id, %error, pause = ?pause, "IM configuration error; outbox publishing paused");
                }
                self.paused_until = Some(Instant::now() + pause);
                self.defer_all(pause);
                (Mark::Defer { after: pause }, None)
            }
        };
        let (status, text) = match &mark {
            Mark::Park { error, .. } => ("failed", error.clone()),
            Mark::Retry { error, .. } => ("retryable", error.clone()),
            _ => ("pending", error.to_string()),
        };
        self.log_row(tracing::Level::WARN, &held.row, status, &text, "Outbox publish failed");
        let room = held.row.room_id.clone();
        self.marks.push((held, mark));
        if let Some(after) = hold_room
            && let Some(queue) = self.queues.remove(&room)
        {
            // The room's later rows wait behind the failed one.
            self.marks.extend(queue.into_iter().map(|h| (h, Mark::Defer { after })));
        }
    }

    fn log_row(&self, level: tracing::Level, row: &OutboxRow, status: &str, error: &str, message: &str) {
        let retry_count =
            if status == "pending" { row.retry_count } else { row.retry_count.saturating_add(1) };
        macro_rules! emit {
            ($lvl:expr) => {
                tracing::event!($lvl, worker = WORKER_NAME, node_id = %self.worker.node_id, event_id = %row.event_id, event_type = %row.event_type, room_id = %row.room_id, retry_count, status, error = %error, "{message}")
            };
        }
        match level {
            tracing::Level::ERROR => emit!(tracing::Level::ERROR),
            tracing::Level::WARN => emit!(tracing::Level::WARN),
            _ => emit!(tracing::Level::DEBUG),
        }
    }
}

impl OutboxWorker {
    /// Publishes a pack of one room's claimed rows through the delivery core (path `worker`):
    /// the events that reach IM in one message, built once its permit is in hand, each other
    /// one (answered by the event filter without a call) on its own. The stack bounds the IM
    /// call with its own timeout; waiting for a permit is not bounded here, the lease is
    /// renewed meanwhile. One result per row, in order.
    async fn publish_pack(&self, rows: &[&OutboxRow]) -> Vec<Result<(), Outcome>> {
        let mut results: Vec<Option<Result<(), Outcome>>> = Vec::with_capacity(rows.len());
        let mut packed: Vec<(usize, Event)> = Vec::new();
        for (i, row) in rows.iter().enumerate() {
            match decode(row) {
                Err(error) => results.push(Some(Err(Outcome::Undecodable(error)))),
                Ok(event) if pack::reaches_im(&event) => {
                    results.push(None);
                    packed.push((i, event));
                }
                Ok(event) => results.push(Some(self.skip(&row.room_id, event).await)),
            }
        }
        if let Some(room) = rows.first().map(|r| r.room_id.as_str())
            && !packed.is_empty()
        {
            let (slots, events): (Vec<usize>, Vec<Event>) = packed.into_iter().unzip();
            let resend = WorkerResend { worker: self, room };
            let fates = match Action::of(resend.publish(events.clone()).await) {
                Action::Delivered => vec![Fate::Delivered; events.len()],
                Action::Split(error) => {
                    split::after_refusal(&resend, &self.quarantine, Path::Worker, events, error).await
                }
                Action::Failed(error) => vec![Fate::Failed(SharedError::new(error)); events.len()],
            };
            for (slot, fate) in slots.into_iter().zip(fates) {
                results[slot] = Some(match fate {
                    Fate::Delivered => Ok(()),
                    // Parked by its mark (a permanent refusal), like any other.
                    Fate::RefusedAlone(error) | Fate::Failed(error) => Err(Outcome::Failed(Box::new(error))),
                });
            }
        }
        results
            .into_iter()
            .map(|r| r.unwrap_or_else(|| Err(Outcome::Failed("not published".into()))))
            .collect()
    }

    /// Publishes an event the filter answers without a call: no permit.
    async fn skip(&self, room: &str, event: Event) -> Result<(), Outcome> {
        let message = Message::new(room.to_owned(), Path::Worker, vec![event]);
        self.outlet.call(message).await.map(|_| ()).map_err(Outcome::Failed)
    }
}

/// The worker's side of a message: its permit (the worker's share first), then the call; the
/// parts of a refused message go the same way, and an event refused alone is parked by its
/// mark (its room's later rows may go on meanwhile).
struct WorkerResend<'a> {
    worker: &'a OutboxWorker,
    room: &'a str,
}

impl WorkerResend<'_> {
    async fn publish(&self, events: Vec<Event>) -> Result<crate::publish::Outcome, BoxError> {
        self.worker.outlet.send_waiting(self.room, events).await
    }
}

impl Resend for WorkerResend<'_> {
    fn send(&self, events: Vec<Event>) -> BoxFuture<'_, Result<(), BoxError>> {
        Box::pin(async move { self.publish(events).await.map(|_| ()) })
    }

    fn refused_alone<'a>(&'a self, _: &'a Event, _: &'a SharedError) -> BoxFuture<'a, bool> {
        Box::pin(std::future::ready(true))
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
