//! The outbox worker: re-delivers the events the synchronous push missed (SPEC §4, §5, §11.2).
//!
//! Where it sits: a command commits its events as `room_outbox` rows ([`crate::store`]) and
//! the command path publishes them right away; whatever is still `pending` (or `retryable`)
//! once its claim-after time has passed is claimed here under a lease, published through the
//! very same [`Publisher`] stack (with [`Path::Worker`](crate::publish::Path::Worker), which
//! waits for rate-limit permits), and marked in buffered, fenced writes.
//!
//! ```text
//! claim_outbox by room: each room's oldest undelivered rows, from its head or right behind
//!   the rows this worker holds (worker_id unique per claim; lease renewed while it holds rows)
//!   └▶ room queues ─▶ the delivery core per pack of a room's rows (permit, message, stack),
//!      each room in order, rooms in parallel
//!   └▶ policy by error class ─▶ delivered | retryable (backoff) | failed (parked) | deferred
//!   └▶ finish_claimed every 250 ms (fenced on worker_id); the next claim overlaps the tail
//! ```
//!
//! The worker never runs room commands and never touches cells, the command log or snapshots:
//! it imports neither `crate::room` nor `crate::http`. Delivery is at-least-once; receivers
//! dedup on `event_id`.
//!
//! An envelope that cannot be decoded (bad JSON, unknown event type, an `event_id` other than
//! the row's) is never published, never marked delivered and never deleted: it is parked
//! (`failed`, reason `undecodable`, `last_error = "undecodable envelope: …"`) for a person to
//! inspect, out of its room's way; `outbox requeue` sends it again once fixed.

mod engine;
mod options;
mod run;
pub mod sampler;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::cluster::Ownership;
use crate::config::OutboxWorkerSettings;
use crate::delivery::groups::Groups;
use crate::delivery::pack::PackLimits;
use crate::delivery::permits::Unlimited;
use crate::delivery::{Outlet, Quarantine, SharedPermits};
use crate::publish::Publisher;
use crate::store::{ClaimScope, OutboxQueue, StoreError};

/// Exports the worker's counters of a known label set at 0 before its first event:
/// `room_outbox_parked_total` for every event type and every reason a row is parked with (the
/// first parked row then shows as an `increase()`, and the dashboard's parked panel reads 0
/// instead of "No data"). `room_outbox_publish_paused` is set to 0 when the worker starts.
pub fn register_zero_series() {
    use crate::telemetry::names::{LABEL_EVENT_TYPE, LABEL_REASON, OUTBOX_PARKED_TOTAL};
    for event_type in crate::domain::EventType::ALL {
        for reason in crate::delivery::action::PARK_REASONS {
            metrics::counter!(OUTBOX_PARKED_TOTAL, LABEL_EVENT_TYPE => event_type.as_str(), LABEL_REASON => reason)
                .increment(0);
        }
    }
}

/// Messages per second one room may get when [`OutboxWorker::with_per_room_rate`] is not
/// called (below Tencent's 40 per group).
pub const DEFAULT_PER_ROOM_RATE: u32 = 35;

/// Value of the `worker` field on every outbox log line.
pub const WORKER_NAME: &str = "room_outbox";

/// Longest part of the node id kept in a claim's `worker_id` (the column holds 128 chars; the
/// fresh per-claim token takes 17).
const MAX_NODE_ID_IN_WORKER_ID: usize = 96;

/// The outbox worker of one node. Cheap to share behind an `Arc`; every method takes `&self`.
#[derive(Debug, Clone)]
pub struct OutboxWorker {
    /// The worker sees the store as the outbox queue only.
    repo: Arc<dyn OutboxQueue>,
    /// The permits and the shared stack.
    outlet: Outlet,
    node_id: String,
    options: OutboxWorkerSettings,
    /// Messages per second one room may get (`im_rate_limit.per_group_per_sec`): the worker
    /// holds at most two seconds of it per room, so a backlogged room never crowds others out
    /// of the claims.
    per_room_rate: u32,
    /// How many events one message may carry (`im_batch.*`).
    pack: PackLimits,
    /// Messages of one room in flight at once (`im_batch.in_flight_per_room`; 1: room order).
    in_flight_per_room: usize,
    /// The senders whose events go alone, shared with the room lanes.
    quarantine: Arc<Quarantine>,
    wake: Arc<Notify>,
    /// In a cluster: claim the rows of the shards this node owns, and others' only once
    /// orphaned this long (their owner is gone).
    scope: Option<(Ownership, Duration)>,
    /// The IM group operations the rows' events carry.
    groups: Groups,
}

/// What one batch did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BatchReport {
    /// Rows claimed.
    pub claimed: usize,
    /// Rows marked `delivered` (IM accepted them, or the filter skipped them).
    pub delivered: u64,
    /// Rows marked `retryable` (publish failed).
    pub retried: u64,
    /// Rows parked as `failed` (permanent error, out of attempts, undecodable).
    pub parked: u64,
    /// Rows handed back unattempted (publishing paused, behind a failed row of their room, or
    /// their claim's lease might end first).
    pub deferred: u64,
    /// Rows whose lease was lost before the mark: left unchanged.
    pub lease_lost: u64,
    /// Rows whose envelope could not be decoded (also counted in `parked` when marked).
    pub undecodable: u64,
    /// Rows not published because the worker was cancelled, handed back claimable at once.
    pub released: u64,
    /// Rows not published because their claim's lease might end first (the worker was paused
    /// past it), handed back claimable at once (a no-op when the lease was lost).
    pub stale: u64,
}

impl OutboxWorker {
    /// A worker for node `node_id` over `repo`, publishing through `publisher`, with the
    /// validated `outbox_worker.*` settings (taken as they are: [`crate::config`] normalised
    /// them) and [`DEFAULT_PER_ROOM_RATE`].
    pub fn new(
        repo: Arc<dyn OutboxQueue>,
        publisher: Publisher,
        node_id: impl Into<String>,
        options: OutboxWorkerSettings,
    ) -> Self {
        let wake = Arc::new(Notify::new());
        let (node_id, per_room_rate) = (node_id.into(), DEFAULT_PER_ROOM_RATE);
        let pack = PackLimits::default();
        Self {
            repo,
            outlet: Outlet::new(publisher, Arc::new(Unlimited)),
            node_id,
            options,
            per_room_rate,
            pack,
            in_flight_per_room: 1,
            quarantine: Arc::default(),
            wake,
            scope: None,
            groups: Groups::NONE,
        }
    }

    /// Keeps up to `k` messages of one room in flight at once (0 is taken as 1): with more than
    /// one, a room's messages may reach IM out of order (clients reorder by `room_version`).
    pub fn with_in_flight_per_room(mut self, k: usize) -> Self {
        self.in_flight_per_room = k.max(1);
        self
    }

    /// Packs up to `limits` of a room's consecutive rows into one message
    /// ([`PackLimits::SINGLE`]: one event a message).
    pub fn with_pack_limits(mut self, limits: PackLimits) -> Self {
        self.pack = limits;
        self
    }

    /// Shares `quarantine` (the senders whose events go alone, SPEC §13.1) with the room lanes:
    /// a sender IM refused on one path is sent alone on both. Without it the worker keeps its
    /// own.
    pub fn with_quarantine(mut self, quarantine: Arc<Quarantine>) -> Self {
        self.quarantine = quarantine;
        self
    }

    /// Attaches to the rows' events the IM group calls `groups` makes (SPEC §14.2), as the
    /// room lanes do; without it, none.
    pub fn with_groups(mut self, groups: Groups) -> Self {
        self.groups = groups;
        self
    }

    /// Takes its permits from `permits` (Tencent's limits, shared with the room lanes); without
    /// it the worker publishes unlimited.
    pub fn with_permits(mut self, permits: SharedPermits) -> Self {
        self.outlet.permits = permits;
        self
    }

    /// Holds at most two seconds of `rate` (messages per second, `im_rate_limit.per_group_per_sec`)
    /// per room; 0 is taken as 1.
    pub fn with_per_room_rate(mut self, rate: u32) -> Self {
        self.per_room_rate = rate.max(1);
        self
    }

    /// Relays the rows of the shards `ownership` holds first (no two nodes contend for one
    /// room's rows); a row claimable for longer than `orphaned_after` is claimed whatever its
    /// shard (the safety net for rows whose owner died).
    pub fn with_ownership(mut self, ownership: Ownership, orphaned_after: Duration) -> Self {
        self.scope = Some((ownership, orphaned_after));
        self
    }

    /// The shards this claim is scoped to, if any.
    fn claim_scope(&self) -> Option<ClaimScope> {
        let (ownership, orphaned_after) = self.scope.as_ref()?;
        Some(ClaimScope { shards: ownership.held_shards()?, orphaned_after: *orphaned_after })
    }

    /// Shares `wake` with the command path (see [`Self::waker`]).
    pub fn with_waker(mut self, wake: Arc<Notify>) -> Self {
        self.wake = wake;
        self
    }

    /// Wakes the worker to claim now rather than on its next tick (the command path calls it
    /// when it leaves an event pending for the worker).
    pub fn waker(&self) -> Arc<Notify> {
        Arc::clone(&self.wake)
    }

    /// Processes one batch start to end: claims up to `batch_size` claimable rows under a
    /// fresh `worker_id`, publishes them through the shared stack (path `worker`; each room's
    /// rows in order behind its earlier undelivered rows, rooms in parallel; one failure never
    /// stops the batch) and marks every result, fenced on the claim. A claim error is
    /// returned; a mark error leaves the rows to return after their lease.
    pub async fn process_pending_outbox(&self) -> Result<BatchReport, StoreError> {
        engine::run_once(self, &CancellationToken::new()).await
    }

    /// [`Self::process_pending_outbox`], stopping once `cancel` fires: the publishes in flight
    /// finish and are marked; the rows not yet started are released, claimable at once.
    pub async fn process_batch(&self, cancel: &CancellationToken) -> Result<BatchReport, StoreError> {
        engine::run_once(self, cancel).await
    }

    /// The settings in force.
    pub fn options(&self) -> &OutboxWorkerSettings {
        &self.options
    }

    /// The node id written into logs and claims.
    pub fn node_id(&self) -> &str {
        &self.node_id
    }

    /// A `worker_id` unique to one claim: the node id and a fresh random token, so a mark left
    /// over from an earlier claim of the same row (even by this process) never matches.
    fn fresh_worker_id(&self) -> String {
        let node = match self.node_id.char_indices().nth(MAX_NODE_ID_IN_WORKER_ID) {
            Some((end, _)) => &self.node_id[..end],
            None => &self.node_id,
        };
        format!("{node}-{:016x}", rand::random::<u64>())
    }
}

#[cfg(test)]
mod tests;
