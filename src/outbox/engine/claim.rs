//! The engine's claims: the store claims by room (each room's oldest undelivered rows, from its
//! head, behind at most the rows this worker already holds), and each claimed row is queued
//! behind the rows of its room held here.

use tokio::time::Instant;

use super::{Engine, Held};
use crate::store::{Claim, StoreError};
use crate::telemetry::names;

/// What one claim brought.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(in crate::outbox) struct Claimed {
    /// Rows claimed.
    pub(in crate::outbox) rows: usize,
    /// The claim left claimable rows it saw: claim again once the rows held allow it.
    pub(in crate::outbox) more: bool,
}

impl Engine {
    /// Claims up to `batch_size` rows and queues them behind the rows of their rooms held here.
    pub(in crate::outbox) async fn claim(&mut self) -> Result<Claimed, StoreError> {
        // Marks first: the claim must see every row handed back or finished as such (and no
        // claim while marks cannot be written: it would take a room's rows behind a failed one
        // still marked as held here).
        if !self.flush().await {
            return Ok(Claimed::default());
        }
        let worker_id = self.worker.fresh_worker_id();
        let options = &self.worker.options;
        let claim = Claim {
            worker_id: worker_id.clone(),
            limit: options.batch_size,
            lease: options.lease(),
            scope: self.worker.claim_scope(),
            own: self.claims.keys().cloned().collect(),
            per_room: self.room_cap(),
            after_room: self.cursor.clone(),
        };
        let asked = Instant::now();
        let batch = self.worker.repo.claim_outbox(&claim).await?;
        self.cursor = batch.cursor;
        let claimed = batch.rows.len();
        if claimed == 0 {
            return Ok(Claimed { rows: 0, more: batch.more });
        }
        self.leases.insert(worker_id.clone(), asked + claim.lease);
        metrics::counter!(names::OUTBOX_CLAIMED_TOTAL).increment(claimed as u64);
        self.report.claimed += claimed;
        self.claims.insert(worker_id.clone(), claimed);
        // Rooms in claim order (the order their first row fell due: rows the sync path released
        // first), each room's rows in id order, after what the room holds here already: the
        // claim took them from the room's head or right behind the rows held here.
        for row in batch.rows {
            self.enqueue(Held::new(worker_id.clone(), row, self.worker.groups));
        }
        Ok(Claimed { rows: claimed, more: batch.more })
    }

    /// True when the claim's lease still runs for at least one publish timeout (always, while
    /// renewals every quarter of the lease succeed, and with one of them failing).
    pub(super) fn lease_outlasts_a_publish(&self, worker_id: &str) -> bool {
        self.leases
            .get(worker_id)
            .is_some_and(|end| Instant::now() + self.worker.options.publish_timeout < *end)
    }

    /// Most rows one room holds here at once (queued, in flight, waiting to be marked): two
    /// seconds of its rate limit, in messages of up to `im_batch.max_events` events each. The
    /// claim takes no more of a room than that allows (and its share of the batch), so a room
    /// draining at its per-group limit leaves the rest of every batch to other rooms.
    fn room_cap(&self) -> usize {
        let messages = (self.worker.per_room_rate as usize).saturating_mul(2);
        messages.saturating_mul(self.worker.pack.max_events.max(1)).max(1)
    }

    fn enqueue(&mut self, held: Held) {
        let room = held.row.room_id.clone();
        let queue = self.queues.entry(room.clone()).or_default();
        queue.push_back(held);
        if queue.len() == 1 && self.has_room_for_another(&room) {
            self.ready.push_back(room);
        }
    }
}
