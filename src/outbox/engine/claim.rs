//! The engine's claims: rows claimed in due order, each queued behind the earlier rows of its
//! room (or deferred when one is held elsewhere, or the room holds enough already).

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use tokio::time::Instant;

use super::{Engine, Held};
use crate::outbox::WORKER_NAME;
use crate::store::{Claim, Mark, OutboxRow, StoreError};
use crate::telemetry::names;

impl Engine {
    /// Claims up to `batch_size` rows and queues them behind their rooms' earlier rows.
    /// Returns how many rows were claimed.
    pub(in crate::outbox) async fn claim(&mut self) -> Result<usize, StoreError> {
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
    pub(super) fn lease_outlasts_a_publish(&self, worker_id: &str) -> bool {
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
}
