//! The outbox worker: re-delivers the events the synchronous push missed (SPEC §4, §5).
//!
//! Where it sits: a command commits its events as `room_outbox` rows ([`crate::store`]) and
//! the command path publishes them right away; whatever is still `pending` (or `retryable`)
//! once its grace time has passed is claimed here under a lease, published through the very
//! same [`Publisher`] stack (with [`Path::Worker`](crate::publish::Path::Worker)), and marked
//! `delivered` or `retryable` in one fenced call per batch.
//!
//! ```text
//! tick ─▶ claim_outbox (lease = batch × publish_timeout + margin, worker_id unique per claim)
//!           └▶ for each row: decode envelope ─▶ publisher.oneshot (own publish_timeout)
//!        ─▶ finish_claimed (one call: delivered | retryable, fenced on worker_id)
//!        ─▶ release_claimed (rows not published because of cancel: claimable at once)
//! ```
//!
//! The worker never runs room commands and never touches cells, the command log or snapshots:
//! it imports neither `crate::room` nor `crate::http`. Delivery is at-least-once; receivers
//! dedup on `event_id`.
//!
//! An envelope that cannot be decoded (bad JSON, unknown event type, an `event_id` other than
//! the row's) is never published, never marked delivered and never deleted: it is recorded as a
//! failed attempt (`retryable`, `retry_count + 1`, `last_error = "undecodable envelope: …"`)
//! so it stays visible to the admin listing and the retry alerts, and it is tried again only
//! after [`UNDECODABLE_RETRY_AFTER`] (a newer node may know the event type; a person may fix
//! the row). V1 never writes `failed` (SPEC §4).

mod batch;
mod options;
mod run;
pub mod sampler;

pub use options::OutboxWorkerOptions;

use std::time::Duration;

use crate::publish::Publisher;
use crate::store::SharedRepository;

/// Value of the `worker` field on every outbox log line.
pub const WORKER_NAME: &str = "room_outbox";

/// How long an undecodable row waits before the worker looks at it again.
pub const UNDECODABLE_RETRY_AFTER: Duration = Duration::from_secs(60);

/// Longest part of the node id kept in a claim's `worker_id` (the column holds 128 chars; the
/// fresh per-claim token takes 17).
const MAX_NODE_ID_IN_WORKER_ID: usize = 96;

/// The outbox worker of one node. Cheap to share behind an `Arc`; every method takes `&self`.
#[derive(Debug, Clone)]
pub struct OutboxWorker {
    repo: SharedRepository,
    publisher: Publisher,
    node_id: String,
    options: OutboxWorkerOptions,
}

/// What one batch did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BatchReport {
    /// Rows claimed.
    pub claimed: usize,
    /// Rows marked `delivered` (IM accepted them, or the filter skipped them).
    pub delivered: u64,
    /// Rows marked `retryable` (publish failed, or the envelope was undecodable).
    pub retried: u64,
    /// Rows whose lease was lost before the mark: left unchanged.
    pub lease_lost: u64,
    /// Rows whose envelope could not be decoded (also counted in `retried` when marked).
    pub undecodable: u64,
    /// Rows not published because the worker was cancelled, handed back claimable at once.
    pub released: u64,
}

impl OutboxWorker {
    /// A worker for node `node_id` over `repo`, publishing through `publisher`. The options are
    /// normalised here.
    pub fn new(
        repo: SharedRepository,
        publisher: Publisher,
        node_id: impl Into<String>,
        options: OutboxWorkerOptions,
    ) -> Self {
        Self { repo, publisher, node_id: node_id.into(), options: options.normalise() }
    }

    /// The normalised options in force.
    pub fn options(&self) -> &OutboxWorkerOptions {
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
