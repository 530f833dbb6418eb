//! The batch mark ([`OutboxQueue::finish_claimed`](super::OutboxQueue::finish_claimed)): a
//! claimed batch's results grouped by what they write, one fenced UPDATE per group, in one
//! transaction.

use sqlx::Transaction;

use super::sql;
use super::types::{Mark, MarkReport, PublishResult};
use crate::store::backend::Backend;
use crate::store::backend::run::Run;
use crate::store::error::{StoreError, short_error};

/// A claimed batch's results in one transaction: one UPDATE per distinct mark (delivered,
/// each error and delay, each park reason, each deferral), every one fenced on this claim's
/// `worker_id`.
pub(super) async fn finish_claimed<DB: Backend>(
    mut tx: Transaction<'static, DB>,
    worker_id: &str,
    results: &[PublishResult],
) -> Result<MarkReport, StoreError> {
    let mut report = MarkReport::default();
    for (mark, ids) in group_marks(results) {
        let mut q = match &mark {
            Mark::Delivered => sql::finish_delivered::<DB>(worker_id, &ids),
            Mark::Retry { error, after } => sql::finish_retryable::<DB>(worker_id, error, *after, &ids),
            Mark::Park { reason, error } => sql::finish_parked::<DB>(worker_id, reason, error, &ids),
            Mark::Defer { after } => sql::finish_deferred::<DB>(worker_id, *after, &ids),
        };
        let changed = q.execute(&mut *tx).await?;
        match mark {
            Mark::Delivered => report.delivered += changed,
            Mark::Retry { .. } => report.retried += changed,
            Mark::Park { .. } => report.parked += changed,
            Mark::Defer { .. } => report.deferred += changed,
        }
    }
    tx.commit().await?;
    let marked = report.delivered + report.retried + report.parked + report.deferred;
    report.lease_lost = results.len() as u64 - marked;
    Ok(report)
}

/// Groups a batch's marks so it costs one UPDATE per distinct (kind, error, delay), not one
/// per row. Errors are shortened to what `last_error` holds: a longer one would fail the whole
/// mark on MySQL in strict mode (and be stored whole on SQLite).
fn group_marks(results: &[PublishResult]) -> Vec<(Mark, Vec<i64>)> {
    let mut groups: Vec<(Mark, Vec<i64>)> = Vec::new();
    for r in results {
        let key = match &r.mark {
            Mark::Retry { error, after } => Mark::Retry { error: short_error(error), after: *after },
            Mark::Park { reason, error } => Mark::Park { reason, error: short_error(error) },
            other => other.clone(),
        };
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, ids)) => ids.push(r.id),
            None => groups.push((key, vec![r.id])),
        }
    }
    groups
}
