//! `room-service consumers ...`: where each event consumer stands, moving one, and retiring one
//! (SPEC §11.6).
//! A reset or a retirement is audited (one line at `info` on the audit target) and frees the consumer's lease,
//! so a running instance loses its fence at its next write and resumes from the new position.

use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Context;
use serde::Serialize;

use super::cli::emit;
use super::{Operator, render};
use crate::consumer::ConsumerName;
use crate::store::{ConsumerRepository, ResetTo};

/// `room-service consumers [--json] <command>`.
#[derive(Debug, Clone, clap::Args)]
pub struct ConsumersArgs {
    /// Print one JSON document instead of a table (for scripts).
    #[arg(long, global = true)]
    pub json: bool,
    /// The operation.
    #[command(subcommand)]
    pub command: ConsumersCommand,
}

/// The consumer operations.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum ConsumersCommand {
    /// Every consumer: enabled here, position, lag, lease owner, last error.
    List,
    /// Moves a consumer: it resumes with the first event after the new position. Events it
    /// skips this way are never sent to it; events it goes back over are sent again.
    Reset {
        /// The consumer.
        #[arg(value_parser = parse_name)]
        name: ConsumerName,
        /// Resume after this outbox id (0: from the oldest stored event).
        #[arg(long, value_parser = clap::value_parser!(i64).range(0..), required_unless_present = "to_time", conflicts_with = "to_time")]
        to: Option<i64>,
        /// Resume with the first event committed at or after this time (RFC 3339, e.g.
        /// 2026-12-01T10:00:00Z).
        #[arg(long, value_parser = parse_time)]
        to_time: Option<i64>,
    },
    /// Forgets a consumer that is disabled everywhere: its position no longer holds retention
    /// back (every stored consumer does, whichever node enables it). Enabled again later, it
    /// starts from the oldest stored event.
    Retire {
        /// The consumer.
        #[arg(value_parser = parse_name)]
        name: ConsumerName,
    },
}

/// One line of `consumers list`.
#[derive(Debug, Clone, Serialize)]
pub struct ConsumerView {
    /// The consumer.
    pub name: String,
    /// Enabled in this configuration (retention waits for enabled consumers only).
    pub enabled: bool,
    /// Every event up to this outbox id was passed.
    pub position: i64,
    /// Age of the oldest event not passed yet (ms); absent when caught up.
    pub lag_ms: Option<i64>,
    /// The instance holding the lease, if one does.
    pub owner: Option<String>,
    /// Last change of its row (ms since the epoch); absent before its first run.
    pub updated_at_ms: Option<i64>,
    /// Its last failed delivery, cleared by the next success.
    pub last_error: Option<String>,
}

/// `consumers reset --json`.
#[derive(Debug, Serialize)]
struct ResetOutput {
    consumer: &'static str,
    before: Option<i64>,
    after: i64,
}

/// `consumers retire --json`.
#[derive(Debug, Serialize)]
struct RetireOutput {
    consumer: &'static str,
    retired: bool,
}

fn parse_name(text: &str) -> Result<ConsumerName, String> {
    text.parse()
}

fn parse_time(text: &str) -> Result<i64, String> {
    let time = humantime::parse_rfc3339_weak(text)
        .map_err(|e| format!("{text:?} is not an RFC 3339 time such as 2026-12-01T10:00:00Z ({e})"))?;
    let since = time.duration_since(UNIX_EPOCH).map_err(|_| format!("{text:?} is before 1970"))?;
    i64::try_from(since.as_millis()).map_err(|_| format!("{text:?} is too far away"))
}

/// Runs one consumers command.
pub(super) async fn run(operator: Operator<'_>, args: ConsumersArgs) -> anyhow::Result<()> {
    let Operator { repo, enabled_consumers, out } = operator;
    match args.command {
        ConsumersCommand::List => {
            let list = list(repo, enabled_consumers).await?;
            emit(out, args.json, &list, || rendered(&list))
        }
        ConsumersCommand::Reset { name, to, to_time } => {
            let target = match (to, to_time) {
                (Some(id), _) => ResetTo::Id(id),
                (None, Some(ms)) => ResetTo::TimeMs(ms),
                // clap requires one of them.
                (None, None) => anyhow::bail!("give --to ID or --to-time T"),
            };
            if let ResetTo::TimeMs(ms) = target
                && ms > now_ms()
            {
                anyhow::bail!("--to-time is in the future: the consumer would skip events not committed yet");
            }
            if let ResetTo::Id(id) = target
                && id > 0
                && repo.events_after(id - 1, 1).await.context("reading the outbox")?.is_empty()
            {
                anyhow::bail!(
                    "--to {id} is past the newest stored event: the consumer would skip events not committed yet"
                );
            }
            let report =
                repo.reset_consumer(name.as_str(), target).await.context("resetting the consumer")?;
            tracing::info!(
                target: crate::telemetry::AUDIT_TARGET,
                audit = "consumer_reset",
                consumer = name.as_str(),
                before = report.before,
                after = report.after,
                "Consumer position reset"
            );
            let output = ResetOutput { consumer: name.as_str(), before: report.before, after: report.after };
            emit(out, args.json, &output, || render::reset(name.as_str(), &report))
        }
        ConsumersCommand::Retire { name } => {
            if enabled_consumers.contains(&name.as_str()) {
                anyhow::bail!(
                    "{} is enabled in this configuration: disable it on every node first",
                    name.as_str()
                );
            }
            let retired = repo.retire_consumer(name.as_str()).await.context("retiring the consumer")?;
            if retired {
                tracing::info!(
                    target: crate::telemetry::AUDIT_TARGET,
                    audit = "consumer_retire",
                    consumer = name.as_str(),
                    "Consumer retired"
                );
            }
            let output = RetireOutput { consumer: name.as_str(), retired };
            emit(out, args.json, &output, || match retired {
                true => format!("{}: retired; retention no longer waits for it\n", name.as_str()),
                false => format!("{}: no stored position; nothing to retire\n", name.as_str()),
            })
        }
    }
}

/// The stored consumers, and the enabled ones that never ran (position 0).
async fn list(repo: &dyn ConsumerRepository, enabled: &[&str]) -> anyhow::Result<Vec<ConsumerView>> {
    let rows = repo.list_consumers().await.context("reading the consumers")?;
    let mut list = Vec::new();
    for name in ConsumerName::ALL.map(ConsumerName::as_str) {
        let row = rows.iter().find(|r| r.name == name);
        let is_enabled = enabled.contains(&name);
        if row.is_none() && !is_enabled {
            continue;
        }
        let position = row.map_or(0, |r| r.position);
        let lag = repo.consumer_lag(position).await.context("reading the consumer lag")?;
        list.push(ConsumerView {
            name: name.to_owned(),
            enabled: is_enabled,
            position,
            lag_ms: lag.map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX)),
            owner: row.filter(|r| r.lease_remaining.is_some()).and_then(|r| r.owner.clone()),
            updated_at_ms: row.map(|r| r.updated_at_ms),
            last_error: row.and_then(|r| r.last_error.clone()),
        });
    }
    Ok(list)
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// `consumers list`: one line per consumer, enabled ones without a row included.
fn rendered(list: &[ConsumerView]) -> String {
    let header = ["CONSUMER", "ENABLED", "POSITION", "LAG", "LEASE OWNER", "UPDATED", "LAST ERROR"];
    render::listing(list, "no consumers (none enabled, none ever ran)", &header, |c| {
        vec![
            c.name.clone(),
            if c.enabled { "yes" } else { "no" }.into(),
            c.position.to_string(),
            c.lag_ms.map_or("-".to_owned(), render::format_age),
            c.owner.as_deref().map_or("-".to_owned(), |o| render::clean(o, 40)),
            c.updated_at_ms.map_or("-".to_owned(), render::time),
            c.last_error.as_deref().map_or("-".to_owned(), |e| render::clean(e, render::ERROR_CELL)),
        ]
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reset_takes_a_known_consumer_and_exactly_one_target() {
        let parse = crate::admin::parse_args::<ConsumersArgs>;
        let args = parse(&["reset", "webhook", "--to", "42"]).expect("by id");
        assert!(matches!(
            args.command,
            ConsumersCommand::Reset { name: ConsumerName::Webhook, to: Some(42), to_time: None }
        ));
        let args =
            parse(&["reset", "audit", "--to-time", "2026-12-01T10:00:00Z", "--json"]).expect("by time");
        assert!(args.json);
        assert!(matches!(
            args.command,
            ConsumersCommand::Reset { name: ConsumerName::Audit, to: None, to_time: Some(1_796_119_200_000) }
        ));
        assert!(parse(&["reset", "im", "--to", "1"]).is_err(), "IM is not a consumer");
        assert!(parse(&["reset", "webhook"]).is_err(), "no target");
        assert!(parse(&["reset", "webhook", "--to", "1", "--to-time", "2026-12-01T10:00:00Z"]).is_err());
        assert!(parse(&["reset", "webhook", "--to", "-1"]).is_err());
        assert!(parse(&["reset", "webhook", "--to-time", "yesterday"]).is_err());
        assert!(parse(&["list"]).is_ok());
        assert!(matches!(
            parse(&["retire", "audit"]).expect("retire").command,
            ConsumersCommand::Retire { name: ConsumerName::Audit }
        ));
        assert!(parse(&["retire"]).is_err());
    }
}
