//! `room-service outbox ...`: the clap arguments and the command runner. Output goes to the
//! given writer (stdout in `main.rs`): a human table by default, one JSON document with
//! `--json`. Errors come back as `anyhow` errors, which `main` prints before exiting non-zero.

use std::io::Write;
use std::time::Duration;

use anyhow::Context;
use serde::Serialize;

use super::ops::{self, OpsError};
use super::{Operator, render};
use crate::store::{OutboxQuery, OutboxStatus};

/// Largest page of `outbox list`.
pub const MAX_LIST_LIMIT: u32 = 1000;

/// `room-service outbox [--json] <command>`.
#[derive(Debug, Clone, clap::Args)]
pub struct OutboxArgs {
    /// Print one JSON document instead of a table (for scripts).
    #[arg(long, global = true)]
    pub json: bool,
    /// The operation.
    #[command(subcommand)]
    pub command: OutboxCommand,
}

/// The outbox operations.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum OutboxCommand {
    /// Rows per undelivered status, oldest undelivered age, highest retry count.
    Stats,
    /// Rows by ascending id (envelopes in --json only).
    List {
        /// Only rows in this status (pending, delivering, delivered, retryable, failed).
        #[arg(long)]
        status: Option<OutboxStatus>,
        /// At most this many rows (1-1000).
        #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_LIST_LIMIT)))]
        limit: u32,
        /// Only ids above this one (paging: pass the last id shown).
        #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(i64).range(0..))]
        after_id: i64,
    },
    /// One row, envelope included.
    Show {
        /// The event id (a UUID).
        event_id: String,
    },
    /// Moves retryable/failed rows back to pending, claimable at once (retry_count is kept).
    /// Rows being delivered or already delivered are never touched.
    Requeue {
        /// These events (each must exist).
        #[arg(required_unless_present = "status", conflicts_with = "status")]
        event_ids: Vec<String>,
        /// Every row in this status instead.
        #[arg(long, value_enum)]
        status: Option<RequeueStatus>,
    },
    /// Deletes delivered rows delivered more than --older-than ago, in batches of 1000.
    PurgeDelivered {
        /// Age threshold, e.g. "7d", "12h" (must be positive).
        #[arg(long, value_parser = parse_positive_duration)]
        older_than: Duration,
        /// Only count the rows that would be deleted.
        #[arg(long)]
        dry_run: bool,
    },
}

/// The statuses `requeue --status` accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RequeueStatus {
    /// Parked rows.
    Failed,
    /// Rows waiting for another worker attempt.
    Retryable,
}

impl From<RequeueStatus> for OutboxStatus {
    fn from(s: RequeueStatus) -> Self {
        match s {
            RequeueStatus::Failed => OutboxStatus::Failed,
            RequeueStatus::Retryable => OutboxStatus::Retryable,
        }
    }
}

fn parse_positive_duration(text: &str) -> Result<Duration, String> {
    match humantime::parse_duration(text) {
        Ok(d) if d.is_zero() => Err("must be greater than zero".into()),
        Ok(d) => Ok(d),
        Err(e) => Err(format!("{text:?} is not a duration such as \"7d\" or \"12h\" ({e})")),
    }
}

/// A page of `outbox list --json`.
#[derive(Debug, Serialize)]
struct ListOutput<'a> {
    rows: &'a [crate::store::OutboxRow],
    /// Pass as `--after-id` for the next page; absent on the last page.
    next_after_id: Option<i64>,
}

/// `outbox purge-delivered --json`.
#[derive(Debug, Serialize)]
struct PurgeOutput {
    dry_run: bool,
    older_than_secs: u64,
    /// Deleted, or (dry run) that would be deleted.
    rows: u64,
    batches: u32,
}

/// Runs one outbox command. `purge-delivered` keeps the rows some enabled event consumer has
/// not passed yet.
pub(super) async fn run(operator: Operator<'_>, args: OutboxArgs) -> anyhow::Result<()> {
    let Operator { repo, enabled_consumers, out } = operator;
    let json = args.json;
    match args.command {
        OutboxCommand::Stats => {
            let stats = repo.outbox_stats().await.context("reading outbox stats")?;
            emit(out, json, &stats, || render::stats(&stats))
        }
        OutboxCommand::List { status, limit, after_id } => {
            let query = OutboxQuery { status, after_id, limit };
            let rows = repo.list_outbox(&query).await.context("listing outbox rows")?;
            let next_after_id = (rows.len() == limit as usize).then(|| rows.last().map(|r| r.id)).flatten();
            let page = ListOutput { rows: &rows, next_after_id };
            emit(out, json, &page, || render::rows(&rows, next_after_id))
        }
        OutboxCommand::Show { event_id } => {
            let row = repo.find_outbox(&event_id).await.context("reading the outbox row")?;
            let row = row.ok_or(OpsError::UnknownEventIds(vec![event_id]))?;
            emit(out, json, &row, || render::row(&row))
        }
        OutboxCommand::Requeue { event_ids, status } => {
            let report = match status {
                Some(status) => ops::requeue_status(repo, status.into()).await?,
                None => ops::requeue_event_ids(repo, &event_ids).await?,
            };
            emit(out, json, &report, || render::requeue(&report))
        }
        OutboxCommand::PurgeDelivered { older_than, dry_run } => {
            let report = if dry_run {
                ops::count_purgeable(repo, older_than, enabled_consumers).await
            } else {
                ops::purge_delivered(repo, older_than, enabled_consumers, crate::store::MAX_PURGE_BATCH, None)
                    .await
            }
            .context("purging delivered rows")?;
            if !dry_run {
                tracing::info!(
                    target: crate::telemetry::AUDIT_TARGET,
                    audit = "outbox_purge_delivered",
                    older_than_secs = older_than.as_secs(),
                    count = report.rows,
                    "Delivered outbox rows purged"
                );
            }
            let output = PurgeOutput {
                dry_run,
                older_than_secs: older_than.as_secs(),
                rows: report.rows,
                batches: report.batches,
            };
            emit(out, json, &output, || render::purge(dry_run, older_than, report))
        }
    }
}

/// Writes `value` as JSON, or the human rendering.
pub(super) fn emit<T: Serialize>(
    out: &mut dyn Write,
    json: bool,
    value: &T,
    human: impl FnOnce() -> String,
) -> anyhow::Result<()> {
    if json {
        serde_json::to_writer_pretty(&mut *out, value).context("writing JSON")?;
        writeln!(out)?;
    } else {
        write!(out, "{}", human())?;
    }
    out.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requeue_takes_ids_or_a_requeueable_status_but_not_both() {
        let parse = crate::admin::parse_args::<OutboxArgs>;
        let args = parse(&["requeue", "a", "b", "--json"]).expect("ids");
        assert!(args.json);
        assert!(
            matches!(args.command, OutboxCommand::Requeue { ref event_ids, status: None } if event_ids.len() == 2)
        );
        let args = parse(&["requeue", "--status", "failed"]).expect("status");
        assert!(matches!(args.command, OutboxCommand::Requeue { status: Some(RequeueStatus::Failed), .. }));
        assert!(parse(&["requeue"]).is_err(), "nothing to requeue");
        assert!(parse(&["requeue", "a", "--status", "failed"]).is_err(), "both");
        assert!(parse(&["requeue", "--status", "delivered"]).is_err(), "delivered is never requeued");
        assert!(parse(&["requeue", "--status", "delivering"]).is_err(), "delivering is never requeued");
    }

    #[test]
    fn list_and_purge_validate_their_values() {
        let parse = crate::admin::parse_args::<OutboxArgs>;
        let args =
            parse(&["list", "--status", "retryable", "--limit", "5", "--after-id", "9"]).expect("list");
        assert!(matches!(
            args.command,
            OutboxCommand::List { status: Some(OutboxStatus::Retryable), limit: 5, after_id: 9 }
        ));
        assert!(parse(&["list", "--status", "lost"]).is_err());
        assert!(parse(&["list", "--limit", "0"]).is_err());
        assert!(parse(&["list", "--limit", "1001"]).is_err());
        assert!(parse(&["list", "--after-id", "-1"]).is_err());
        let args = parse(&["purge-delivered", "--older-than", "7d", "--dry-run"]).expect("purge");
        assert!(matches!(
            args.command,
            OutboxCommand::PurgeDelivered { older_than, dry_run: true } if older_than == Duration::from_secs(7 * 86400)
        ));
        assert!(parse(&["purge-delivered", "--older-than", "0s"]).is_err());
        assert!(parse(&["purge-delivered", "--older-than", "soon"]).is_err());
        assert!(parse(&["purge-delivered"]).is_err(), "--older-than is required");
    }
}
