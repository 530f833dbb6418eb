//! The backlog sampler: refreshes `room_outbox_rows{status}`,
//! `room_outbox_oldest_pending_age_seconds` and `room_outbox_hot_room_lag_seconds` from cheap
//! indexed queries, so dashboards and
//! alerts see the backlog even when no worker is publishing.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::store::{OutboxAdmin, OutboxStats, StoreError};
use crate::telemetry::names;

/// Reads the backlog once and sets the gauges.
pub async fn sample_backlog(repo: &dyn OutboxAdmin) -> Result<OutboxStats, StoreError> {
    let stats = repo.outbox_stats().await?;
    for (status, count) in [
        ("pending", stats.pending),
        ("delivering", stats.delivering),
        ("retryable", stats.retryable),
        ("failed", stats.failed),
    ] {
        metrics::gauge!(names::OUTBOX_ROWS, names::LABEL_STATUS => status).set(count as f64);
    }
    let age_seconds = stats.oldest_pending_age_ms.unwrap_or(0).max(0) as f64 / 1000.0;
    metrics::gauge!(names::OUTBOX_OLDEST_PENDING_AGE_SECONDS).set(age_seconds);
    // Every room's events go out in room order, so the oldest undelivered event is the head
    // of the most lagging room: its age is that room's lag.
    metrics::gauge!(names::OUTBOX_HOT_ROOM_LAG_SECONDS).set(age_seconds);
    Ok(stats)
}

/// Samples every `interval` until cancelled; a failed read is logged and retried next tick.
pub async fn run_backlog_sampler(repo: Arc<dyn OutboxAdmin>, interval: Duration, cancel: CancellationToken) {
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while cancel.run_until_cancelled(tick.tick()).await.is_some() {
        if let Err(error) = sample_backlog(repo.as_ref()).await {
            tracing::warn!(worker = "room_outbox", %error, "Could not sample the outbox backlog");
        }
    }
}
