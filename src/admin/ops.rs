//! The outbox operations behind the CLI and the retention task, over the store's
//! [`OutboxAdmin`] role (purges also read the consumers' floor): requeues (by event ids, or every row of a status page by page) with an
//! audit log line per batch, and the batched purge of old delivered rows.

use std::collections::HashMap;
use std::time::Duration;

use serde::Serialize;
use tokio_util::sync::CancellationToken;

use crate::store::{
    ConsumerRepository, MAX_PURGE_BATCH, MAX_REQUEUE_BATCH, OutboxAdmin, OutboxStatus, REQUEUEABLE,
    RequeueTarget, RequeuedRow, StoreError,
};
use crate::telemetry::names;

/// What a requeue did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RequeueReport {
    /// Rows moved back to `pending`, by id.
    pub requeued: Vec<RequeuedRow>,
    /// Rows named by event id that were left alone because of their status.
    pub skipped: Vec<SkippedRow>,
}

/// A row a requeue left alone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SkippedRow {
    /// The event.
    pub event_id: String,
    /// Its status, which is not requeueable (or changed while the requeue ran).
    pub status: String,
}

/// What a purge did (or, dry, would do).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct PurgeReport {
    /// Rows deleted (dry run: rows that would be deleted).
    pub rows: u64,
    /// `DELETE` statements run (0 for a dry run).
    pub batches: u32,
}

/// Why an operation was refused before touching anything.
#[derive(Debug, thiserror::Error)]
pub enum OpsError {
    /// Event ids with no outbox row.
    #[error("no outbox row has event id {}", .0.join(", "))]
    UnknownEventIds(Vec<String>),
    /// A requeue by a status that is never requeued.
    #[error("only retryable and failed rows can be requeued, not {0}")]
    NotRequeueable(&'static str),
    /// The database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Requeues the rows of `event_ids` that are `retryable` or `failed`. Every id must exist
/// (otherwise nothing changes and [`OpsError::UnknownEventIds`] names the missing ones); rows in
/// other statuses are reported as skipped.
pub async fn requeue_event_ids(
    repo: &dyn OutboxAdmin,
    event_ids: &[String],
) -> Result<RequeueReport, OpsError> {
    let mut ids: Vec<String> = Vec::with_capacity(event_ids.len());
    for id in event_ids {
        if !ids.contains(id) {
            ids.push(id.clone());
        }
    }
    let mut before = HashMap::new();
    let mut unknown = Vec::new();
    for id in &ids {
        match repo.find_outbox(id).await? {
            Some(row) => {
                before.insert(id.clone(), row.status);
            }
            None => unknown.push(id.clone()),
        }
    }
    if !unknown.is_empty() {
        return Err(OpsError::UnknownEventIds(unknown));
    }
    let mut report = RequeueReport::default();
    for chunk in ids.chunks(MAX_REQUEUE_BATCH as usize) {
        let rows = repo.requeue_outbox(RequeueTarget::EventIds(chunk)).await?;
        audit(&rows, None);
        report.requeued.extend(rows);
    }
    report.requeued.sort_by_key(|r| r.id);
    for id in ids {
        if !report.requeued.iter().any(|r| r.event_id == id) {
            let status = before.remove(&id).unwrap_or_default();
            report.skipped.push(SkippedRow { event_id: id, status });
        }
    }
    Ok(report)
}

/// Requeues every row in `status` (`retryable` or `failed`), in pages of at most
/// [`MAX_REQUEUE_BATCH`] by ascending id. Rows that come back into `status` while it runs (a
/// requeued row failing again) are not requeued twice: each page starts after the last id seen.
pub async fn requeue_status(repo: &dyn OutboxAdmin, status: OutboxStatus) -> Result<RequeueReport, OpsError> {
    if !REQUEUEABLE.contains(&status) {
        return Err(OpsError::NotRequeueable(status.as_str()));
    }
    let mut report = RequeueReport::default();
    let mut after_id = 0;
    loop {
        let target = RequeueTarget::Status { status, after_id, limit: MAX_REQUEUE_BATCH };
        let rows = repo.requeue_outbox(target).await?;
        let Some(last) = rows.last() else { break };
        after_id = last.id;
        let full = rows.len() == MAX_REQUEUE_BATCH as usize;
        audit(&rows, Some(status));
        report.requeued.extend(rows);
        if !full {
            break;
        }
    }
    Ok(report)
}

/// The audit line of one requeue batch (who ran it is the operator's shell; what changed is here).
fn audit(rows: &[RequeuedRow], status: Option<OutboxStatus>) {
    if rows.is_empty() {
        return;
    }
    let event_ids: Vec<&str> = rows.iter().map(|r| r.event_id.as_str()).collect();
    tracing::info!(
        target: crate::telemetry::AUDIT_TARGET,
        audit = "outbox_requeue",
        from_status = status.map(OutboxStatus::as_str),
        count = rows.len(),
        event_ids = ?event_ids,
        "Outbox rows requeued to pending"
    );
}

/// Deletes `delivered` rows delivered more than `older_than` ago, in batches of at most
/// `batch_size` (capped at [`MAX_PURGE_BATCH`]) by primary key, until none is left or `cancel`
/// fires (checked between batches). Rows above the lowest position of `consumers` stay: an
/// event is deleted only once every enabled consumer has passed it (the floor is read once, so
/// consumers advancing meanwhile free their rows for the next call). Counts
/// [`names::OUTBOX_PURGED_ROWS_TOTAL`].
pub async fn purge_delivered(
    repo: &(impl OutboxAdmin + ConsumerRepository + ?Sized),
    older_than: Duration,
    consumers: &[&str],
    batch_size: u32,
    cancel: Option<&CancellationToken>,
) -> Result<PurgeReport, StoreError> {
    let batch_size = batch_size.clamp(1, MAX_PURGE_BATCH);
    let up_to = repo.consumers_floor(consumers).await?;
    let mut report = PurgeReport::default();
    loop {
        let deleted = repo.purge_delivered_batch(older_than, up_to, batch_size).await?;
        report.rows += deleted;
        report.batches += 1;
        metrics::counter!(names::OUTBOX_PURGED_ROWS_TOTAL).increment(deleted);
        if deleted < u64::from(batch_size) || cancel.is_some_and(CancellationToken::is_cancelled) {
            return Ok(report);
        }
        // Let the command path's writes in between two batches.
        tokio::task::yield_now().await;
    }
}

/// How many rows [`purge_delivered`] would delete now, with the same `consumers`.
pub async fn count_purgeable(
    repo: &(impl OutboxAdmin + ConsumerRepository + ?Sized),
    older_than: Duration,
    consumers: &[&str],
) -> Result<PurgeReport, StoreError> {
    let up_to = repo.consumers_floor(consumers).await?;
    Ok(PurgeReport { rows: repo.count_purgeable(older_than, up_to).await?, batches: 0 })
}
