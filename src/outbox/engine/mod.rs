//! The worker's engine: claimed rows flow into per-room queues, each room publishes its rows
//! one after another (one spawned task per row, rooms in parallel up to `max_in_flight`), and
//! the results are marked in buffered, fenced writes at least every [`MARK_INTERVAL`].
//!
//! ```text
//! claim (when the rows held fall to the low-water mark) ─▶ head check ─▶ room queues
//!   ─▶ publish tasks (each room in order; the stack waits for rate-limit permits)
//!   ─▶ marks buffer ─(every 250 ms, and before each claim)─▶ finish_claimed per claim
//!   lease renewal every lease/4 for every claim still holding rows
//! ```
//!
//! Per-room order: a claimed row is published only behind every earlier undelivered row of its
//! room. Rows of a room already held by this worker are queued behind them in memory; an
//! earlier row held elsewhere (retryable, pending, another worker's) defers the room's claimed
//! rows until that row's next attempt time. A failed row defers the rest of its room's queue
//! behind it, so a stuck room holds back only its own events.

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::Duration;

use futures::FutureExt;
use rand::Rng;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

mod marks;

use super::policy::{Failure, on_failure};
use super::{BatchReport, OutboxWorker, WORKER_NAME};
use crate::publish::BoxError;
use crate::store::{Claim, Mark, OutboxRow, StoreError};
use crate::telemetry::names;

/// Results are written at least this often while rows are in flight.
pub(super) const MARK_INTERVAL: Duration = Duration::from_millis(250);

/// One claimed row and the claim holding it.
pub(super) struct Held {
    worker_id: String,
    row: OutboxRow,
}

/// A finished publish task.
struct Done {
    held: Held,
    result: Result<(), Outcome>,
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
    /// Rooms with queued rows and nothing in flight, in arrival order.
    ready: VecDeque<String>,
    busy: HashSet<String>,
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
            ready: VecDeque::new(),
            busy: HashSet::new(),
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

    /// Claims up to `batch_size` rows and queues them behind their rooms' earlier rows.
    /// Returns how many rows were claimed.
    pub(super) async fn claim(&mut self) -> Result<usize, StoreError> {
        // Marks first: a row deferred in memory must be visible as such to the head check (and
        // no claim while marks cannot be written: the order check would not see them).
        if !self.flush().await {
            return Ok(0);
        }
        let worker_id = self.worker.fresh_worker_id();
        let options = &self.worker.options;
        let claim = Claim {
            worker_id: worker_id.clone(),
            limit: options.batch_size,
            lease: options.lease(),
            scope: self.worker.claim_scope(),
        };
        let asked = Instant::now();
        let mut rows = self.worker.repo.claim_outbox(&claim).await?;
        if rows.is_empty() {
            return Ok(0);
        }
        self.leases.insert(worker_id.clone(), asked + claim.lease);
        // Rooms in the order their rows fell due (rows the sync path released come first, ahead
        // of an old backlog), each room's rows in id order.
        let mut rank: HashMap<String, usize> = HashMap::new();
        for row in &rows {
            let next = rank.len();
            rank.entry(row.room_id.clone()).or_insert(next);
        }
        rows.sort_by_key(|r| (rank.get(&r.room_id).copied().unwrap_or(usize::MAX), r.id));
        let claimed = rows.len();
        metrics::counter!(names::OUTBOX_CLAIMED_TOTAL).increment(claimed as u64);
        self.report.claimed += claimed;
        self.claims.insert(worker_id.clone(), claimed);
        let heads = self.heads(&worker_id, &rows).await;
        let (rate, cap) = (f64::from(self.worker.per_room_rate.max(1)), self.room_cap());
        let mut excess: HashMap<String, u32> = HashMap::new();
        for row in rows {
            let room = row.room_id.clone();
            let held = Held { worker_id: worker_id.clone(), row };
            let behind = match &heads {
                Ok(heads) => heads.get(&room).filter(|(head, _)| held.row.id > *head).map(|(_, wait)| *wait),
                Err(()) => Some(self.worker.options.poll_interval),
            };
            if let Some(after) = behind {
                // An earlier row of the room is undelivered elsewhere: wait for its next try.
                self.marks.push((held, Mark::Defer { after }));
            } else if self.held_in(&room) >= cap {
                // The room already holds what it can publish in a while at its rate: the rest
                // comes back when it is due, and other rooms' rows are claimed meanwhile.
                let k = excess.entry(room).or_insert(0);
                *k += 1;
                let after = Duration::from_secs_f64(1.0 + f64::from(*k) / rate);
                self.marks.push((held, Mark::Defer { after }));
            } else {
                self.enqueue(held);
            }
        }
        Ok(claimed)
    }

    /// True when the claim's lease still runs for at least one publish timeout (always, while
    /// renewals every quarter of the lease succeed, and with one of them failing).
    fn lease_outlasts_a_publish(&self, worker_id: &str) -> bool {
        self.leases
            .get(worker_id)
            .is_some_and(|end| Instant::now() + self.worker.options.publish_timeout < *end)
    }

    /// Most rows one room holds in memory: two seconds of its rate limit.
    fn room_cap(&self) -> usize {
        (self.worker.per_room_rate as usize).saturating_mul(2).max(1)
    }

    /// Rows of `room` queued or in flight here.
    fn held_in(&self, room: &str) -> usize {
        self.queues.get(room).map_or(0, VecDeque::len) + usize::from(self.busy.contains(room))
    }

    /// The oldest undelivered row of each room of a fresh claim held elsewhere (not by this
    /// worker's claims), and how long until its next try: every claimed row of the room after
    /// it waits that long. `Err` when the read failed (every room then waits a poll interval).
    async fn heads(
        &self,
        worker_id: &str,
        rows: &[OutboxRow],
    ) -> Result<HashMap<String, (i64, Duration)>, ()> {
        let mut rooms: Vec<String> = rows.iter().map(|r| r.room_id.clone()).collect();
        rooms.sort();
        rooms.dedup();
        let own: Vec<String> = self.claims.keys().cloned().chain([worker_id.to_owned()]).collect();
        let poll = self.worker.options.poll_interval;
        match self.worker.repo.room_heads(&rooms, &own).await {
            Ok(heads) => Ok(heads
                .into_iter()
                .map(|h| {
                    let after = match h.status.as_str() {
                        "delivering" => poll,
                        _ => Duration::from_millis(u64::try_from(h.wait_ms).unwrap_or(0) + 1),
                    };
                    (h.room_id, (h.id, after))
                })
                .collect()),
            Err(error) => {
                tracing::warn!(worker = WORKER_NAME, node_id = %self.worker.node_id, %error, "Room order check failed; deferring the claim");
                Err(())
            }
        }
    }

    fn enqueue(&mut self, held: Held) {
        let room = held.row.room_id.clone();
        let queue = self.queues.entry(room.clone()).or_default();
        queue.push_back(held);
        if queue.len() == 1 && !self.busy.contains(&room) {
            self.ready.push_back(room);
        }
    }

    /// Starts the next row of ready rooms while fewer than `max_in_flight` publish.
    pub(super) fn start(&mut self) {
        while self.busy.len() < self.worker.options.max_in_flight.max(1) {
            let Some(room) = self.ready.pop_front() else { return };
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
            let Some(held) = queue.pop_front() else { continue };
            if queue.is_empty() {
                // Forget drained rooms: the map holds only rooms with rows waiting.
                self.queues.remove(&room);
            }
            self.busy.insert(room);
            let worker = self.worker.clone();
            self.tasks.spawn(async move {
                // A panic below becomes a failed attempt: the row is always marked, and its
                // claim always ends (a lost row would have its lease renewed forever).
                let publish = std::panic::AssertUnwindSafe(worker.publish_held(&held.row)).catch_unwind();
                let result =
                    publish.await.unwrap_or_else(|_| Err(Outcome::Failed("publish task panicked".into())));
                Done { held, result }
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
        let Ok(Done { held, result }) = joined else {
            // Only an abort ends a task without its `Done` (panics are caught inside it).
            tracing::error!(worker = WORKER_NAME, node_id = %self.worker.node_id, "Outbox publish task aborted");
            return;
        };
        let room = held.row.room_id.clone();
        self.busy.remove(&room);
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
                self.marks.push((held, Mark::Park { reason: "undecodable", error }));
            }
            Err(Outcome::Failed(error)) => self.failed(held, error),
        }
        if self.queues.get(&room).is_some_and(|q| !q.is_empty()) {
            self.ready.push_back(room);
        }
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
    /// Publishes one claimed row through the shared stack (path `worker`). The stack bounds
    /// the IM call with its own timeout; waiting for a rate-limit permit is not bounded here,
    /// the lease is renewed meanwhile.
    async fn publish_held(&self, row: &OutboxRow) -> Result<(), Outcome> {
        let message = super::decode(row).map_err(Outcome::Undecodable)?;
        match self.publisher.clone().oneshot(message).await {
            Ok(_) => Ok(()),
            Err(error) => Err(Outcome::Failed(error)),
        }
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
