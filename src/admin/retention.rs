//! Retention (SPEC §11): delivered outbox rows older than `outbox_worker.retention` are deleted
//! in the background, so the table and the claim stay small for years.
//!
//! Every [`RetentionOptions::interval`] one round runs: take the purge lock without waiting
//! (MySQL: `GET_LOCK` on a session of its own, so one instance at a time purges; an instance
//! that finds it taken skips the round), delete old `delivered` rows in batches of at most
//! [`MAX_PURGE_BATCH`] by primary key until none is left, release the lock. No other status is
//! ever touched. Started by `app` on the workers' tracker and token; it stops between batches.

use std::time::Duration;

use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;

use super::ops::{self, PurgeReport};
use crate::store::{MAX_PURGE_BATCH, Repository, SharedRepository, StoreError};

/// Default time between two purge rounds.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(5 * 60);

/// How the retention task runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetentionOptions {
    /// Delivered rows older than this are deleted.
    pub retention: Duration,
    /// Time between two rounds (the first round runs at once).
    pub interval: Duration,
    /// Rows per `DELETE`, 1..=[`MAX_PURGE_BATCH`].
    pub batch_size: u32,
    /// This instance, for the log lines.
    pub node_id: String,
    /// The enabled event consumers: a row stays until each has passed it (their floor is read
    /// every round).
    pub consumers: Vec<&'static str>,
}

impl RetentionOptions {
    /// Rounds every [`DEFAULT_INTERVAL`], batches of [`MAX_PURGE_BATCH`], no consumers.
    pub fn new(retention: Duration, node_id: impl Into<String>) -> Self {
        Self {
            retention,
            interval: DEFAULT_INTERVAL,
            batch_size: MAX_PURGE_BATCH,
            node_id: node_id.into(),
            consumers: Vec::new(),
        }
    }
}

/// What one round did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetentionRound {
    /// Another instance holds the purge lock; nothing was done.
    Skipped,
    /// This instance purged.
    Purged(PurgeReport),
}

/// Runs rounds until `cancel` fires; a failed round is logged and the next one runs on time.
pub async fn run_retention(repo: SharedRepository, options: RetentionOptions, cancel: CancellationToken) {
    tracing::info!(
        worker = "room_outbox_retention",
        node_id = %options.node_id,
        retention = %humantime::format_duration(options.retention),
        "Outbox retention started"
    );
    let mut tick = tokio::time::interval(options.interval.max(Duration::from_millis(10)));
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    while cancel.run_until_cancelled(tick.tick()).await.is_some() {
        match run_retention_once(repo.as_ref(), &options, &cancel).await {
            Ok(RetentionRound::Purged(report)) if report.rows > 0 => tracing::info!(
                worker = "room_outbox_retention",
                node_id = %options.node_id,
                rows = report.rows,
                batches = report.batches,
                "Delivered outbox rows purged"
            ),
            Ok(RetentionRound::Purged(_)) => {}
            Ok(RetentionRound::Skipped) => tracing::debug!(
                worker = "room_outbox_retention",
                node_id = %options.node_id,
                "Another instance is purging; round skipped"
            ),
            Err(error) => tracing::warn!(
                worker = "room_outbox_retention",
                node_id = %options.node_id,
                %error,
                "Outbox retention round failed"
            ),
        }
    }
    tracing::info!(worker = "room_outbox_retention", node_id = %options.node_id, "Outbox retention stopped");
}

/// One round: lock, purge in batches, release. Public so tests can drive it.
pub async fn run_retention_once(
    repo: &dyn Repository,
    options: &RetentionOptions,
    cancel: &CancellationToken,
) -> Result<RetentionRound, StoreError> {
    let Some(lock) = repo.try_purge_lock().await? else {
        return Ok(RetentionRound::Skipped);
    };
    let purged =
        ops::purge_delivered(repo, options.retention, &options.consumers, options.batch_size, Some(cancel))
            .await;
    // Released even when the purge failed (dropping the lock would release it too, by closing
    // its session).
    let released = lock.release().await;
    let report = purged?;
    released?;
    Ok(RetentionRound::Purged(report))
}
