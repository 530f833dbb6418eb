//! One batch: claim, decode and publish the rows (each room's in order, rooms in parallel up
//! to `max_in_flight`), mark the results in one call, hand back what a cancel left
//! unpublished.

use std::collections::HashMap;
use std::sync::Arc;

use futures::stream::{self, StreamExt};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use super::{BatchReport, OutboxWorker, UNDECODABLE_RETRY_AFTER, WORKER_NAME};
use crate::domain::EventEnvelope;
use crate::publish::{Message, Path, Priority, classify};
use crate::store::{Claim, OutboxRow, PublishResult, StoreError, short_error};
use crate::telemetry::names::{OUTBOX_CLAIMED_TOTAL, OUTBOX_LEASE_LOST_TOTAL};

/// Logs one line about one outbox row with every field SPEC §10 asks for.
macro_rules! row_log {
    ($level:expr, $worker:expr, $row:expr, $retry_count:expr, $status:expr, $error:expr, $msg:literal) => {
        tracing::event!(
            $level,
            worker = WORKER_NAME,
            node_id = %$worker.node_id,
            event_id = %$row.event_id,
            event_type = %$row.event_type,
            room_id = %$row.room_id,
            retry_count = $retry_count,
            status = $status,
            error = %$error,
            $msg
        )
    };
}

impl OutboxWorker {
    /// Processes one batch: claims up to `batch_size` claimable rows under a fresh
    /// `worker_id`, publishes each decodable envelope through the shared stack (path `worker`,
    /// each bounded by `publish_timeout`; one failure never stops the batch), then marks the
    /// whole batch in one fenced `finish_claimed` call: success → `delivered`, failure →
    /// `retryable` with a short error. Undecodable rows are left for a person (see the module
    /// docs). A claim or mark error ends the batch and is returned.
    pub async fn process_pending_outbox(&self) -> Result<BatchReport, StoreError> {
        self.process_batch(&CancellationToken::new()).await
    }

    /// [`Self::process_pending_outbox`], stopping before the next row once `cancel` fires: the
    /// row in flight finishes and is marked; the rows not yet published are released.
    pub(super) async fn process_batch(&self, cancel: &CancellationToken) -> Result<BatchReport, StoreError> {
        let worker_id = self.fresh_worker_id();
        let claim = Claim { worker_id, limit: self.options.batch_size, lease: self.options.lease() };
        let rows = self.repo.claim_outbox(&claim).await?;
        let mut report = BatchReport { claimed: rows.len(), ..BatchReport::default() };
        if rows.is_empty() {
            return Ok(report);
        }
        metrics::counter!(OUTBOX_CLAIMED_TOTAL).increment(rows.len() as u64);

        // Rows of one room go one after another, in id order; rooms go in parallel, at most
        // `max_in_flight` at once.
        let claimed = rows.len();
        let lanes = lanes_by_room(rows).into_iter().map(|lane| self.publish_lane(lane, cancel));
        let lanes: Vec<Lane> =
            stream::iter(lanes).buffer_unordered(self.options.max_in_flight.max(1)).collect().await;
        let mut results = Vec::with_capacity(claimed);
        let mut unpublished = Vec::new();
        for lane in lanes {
            results.extend(lane.results);
            unpublished.extend(lane.unpublished);
            report.undecodable += lane.undecodable;
        }

        if !unpublished.is_empty() {
            report.released = self.release(&claim.worker_id, &unpublished).await;
        }
        let marks = self.repo.finish_claimed(&claim.worker_id, &results).await?;
        report.delivered = marks.delivered;
        report.retried = marks.retried;
        report.lease_lost = marks.lease_lost;
        if marks.lease_lost > 0 {
            metrics::counter!(OUTBOX_LEASE_LOST_TOTAL).increment(marks.lease_lost);
            tracing::warn!(
                worker = WORKER_NAME,
                node_id = %self.node_id,
                worker_id = %claim.worker_id,
                lease_lost = marks.lease_lost,
                status = "delivering",
                "Outbox lease lost; results left unmarked"
            );
        }
        Ok(report)
    }

    /// Publishes the rows of one room in order, stopping before the next row once `cancel`
    /// fires (the row in flight finishes).
    async fn publish_lane(&self, rows: Vec<OutboxRow>, cancel: &CancellationToken) -> Lane {
        let mut lane = Lane::default();
        for row in &rows {
            if cancel.is_cancelled() {
                lane.unpublished.push(row.id);
                continue;
            }
            let result = match decode(row) {
                Ok(message) => self.publish_row(row, message).await,
                Err(error) => {
                    lane.undecodable += 1;
                    let error = short_error(&error);
                    row_log!(
                        tracing::Level::ERROR,
                        self,
                        row,
                        row.retry_count.saturating_add(1),
                        "retryable",
                        error,
                        "Undecodable outbox envelope left for inspection"
                    );
                    PublishResult { id: row.id, outcome: Err(error), retry_after: UNDECODABLE_RETRY_AFTER }
                }
            };
            lane.results.push(result);
        }
        lane
    }

    /// Publishes one decoded row, bounded by `publish_timeout`, and turns the answer into the
    /// result to mark.
    async fn publish_row(&self, row: &OutboxRow, message: Message) -> PublishResult {
        let timeout = self.options.publish_timeout;
        // The stack's own timeout (same duration) fires first and is counted and traced; this
        // bound, a little later, only guards against a stack without one.
        let answer =
            tokio::time::timeout(timeout + OUTER_TIMEOUT_MARGIN, self.publisher.clone().oneshot(message))
                .await;
        let outcome = match answer {
            // Delivered or skipped by the filter (the publish span records which): done.
            Ok(Ok(_outcome)) => {
                row_log!(
                    tracing::Level::DEBUG,
                    self,
                    row,
                    row.retry_count,
                    "delivered",
                    "",
                    "Outbox event published"
                );
                Ok(())
            }
            Ok(Err(error)) => Err(short_error(&format!("{}: {error}", classify(error.as_ref()).as_str()))),
            Err(_elapsed) => Err(format!("timeout: publish took longer than {timeout:?}")),
        };
        if let Err(error) = &outcome {
            row_log!(
                tracing::Level::WARN,
                self,
                row,
                row.retry_count.saturating_add(1),
                "retryable",
                error,
                "Outbox publish failed; retrying later"
            );
        }
        PublishResult { id: row.id, outcome, retry_after: self.options.retry_after() }
    }

    /// Hands unpublished rows back; a failure only delays them until their lease expires.
    async fn release(&self, worker_id: &str, ids: &[i64]) -> u64 {
        match self.repo.release_claimed(worker_id, ids).await {
            Ok(released) => {
                tracing::info!(
                    worker = WORKER_NAME,
                    node_id = %self.node_id,
                    worker_id = %worker_id,
                    released,
                    status = "pending",
                    "Outbox worker cancelled; unpublished rows released"
                );
                released
            }
            Err(error) => {
                tracing::warn!(
                    worker = WORKER_NAME,
                    node_id = %self.node_id,
                    worker_id = %worker_id,
                    rows = ids.len(),
                    status = "delivering",
                    %error,
                    "Could not release unpublished outbox rows; they return after their lease"
                );
                0
            }
        }
    }
}

/// How much later than the stack's own timeout the worker's guard fires.
const OUTER_TIMEOUT_MARGIN: std::time::Duration = std::time::Duration::from_millis(100);

/// What one room's rows of a batch came to.
#[derive(Default)]
struct Lane {
    results: Vec<PublishResult>,
    unpublished: Vec<i64>,
    undecodable: u64,
}

/// Groups a batch by room, each group in id order, groups in order of their first row.
fn lanes_by_room(mut rows: Vec<OutboxRow>) -> Vec<Vec<OutboxRow>> {
    rows.sort_by_key(|r| r.id);
    let mut lanes: Vec<Vec<OutboxRow>> = Vec::new();
    let mut lane_of: HashMap<String, usize> = HashMap::new();
    for row in rows {
        let index = *lane_of.entry(row.room_id.clone()).or_insert_with(|| {
            lanes.push(Vec::new());
            lanes.len() - 1
        });
        lanes[index].push(row);
    }
    lanes
}

/// Decodes a row's envelope into the message to publish. The body is the stored JSON,
/// unchanged, so every retry sends the same bytes the synchronous path sent.
pub(super) fn decode(row: &OutboxRow) -> Result<Message, String> {
    let envelope: EventEnvelope =
        serde_json::from_str(&row.envelope).map_err(|e| format!("undecodable envelope: {e}"))?;
    if envelope.event_id != row.event_id {
        return Err("undecodable envelope: its event_id differs from the row's".into());
    }
    Ok(Message {
        event_id: row.event_id.clone(),
        event_type: envelope.event_type.as_str(),
        group: envelope.room_id,
        priority: if envelope.event_type.is_high_priority() { Priority::High } else { Priority::Normal },
        body: Arc::from(row.envelope.as_str()),
        path: Path::Worker,
    })
}
