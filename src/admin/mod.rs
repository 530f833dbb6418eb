//! Operator tooling around the outbox (SPEC §11): the `room-service outbox ...` and
//! `room-service consumers ...` commands, and the retention purge that runs beside the outbox
//! worker.
//!
//! ```text
//! main.rs `outbox` ─▶ cli (clap args) ─▶ ops (requeue, purge loop) ─▶ store::OutboxAdmin
//!                         └─▶ render (tables | JSON on stdout)
//! app start ─▶ retention::run_retention (every few minutes, GET_LOCK on MySQL) ─▶ ops::purge
//! ```
//!
//! Everything here goes through the [`Repository`](crate::store::Repository); nothing touches
//! rooms, the command path or the publish stack. Writes are fenced on the row status: requeues
//! move only `retryable`/`failed` rows, purges delete only `delivered` rows.

pub mod cli;
pub mod consumers;
pub mod ops;
mod render;
pub mod retention;

pub use cli::{OutboxArgs, OutboxCommand};
pub use consumers::{ConsumersArgs, ConsumersCommand};
pub use ops::{PurgeReport, RequeueReport, SkippedRow};
pub use retention::{RetentionOptions, RetentionRound, run_retention, run_retention_once};

/// One operator command: `room-service outbox ...` or `room-service consumers ...`.
#[derive(Debug)]
pub enum Tool {
    /// `room-service outbox ...`
    Outbox(OutboxArgs),
    /// `room-service consumers ...`
    Consumers(ConsumersArgs),
}

/// What an operator command runs against.
pub struct Operator<'a> {
    /// The service's database.
    pub repo: &'a dyn crate::store::Repository,
    /// The event consumers the configuration enables (a purge keeps the rows they have not
    /// passed; an enabled consumer cannot be retired).
    pub enabled_consumers: &'a [&'a str],
    /// Where the command writes its output.
    pub out: &'a mut dyn std::io::Write,
}

/// Runs one operator command.
pub async fn run(operator: Operator<'_>, tool: Tool) -> anyhow::Result<()> {
    match tool {
        Tool::Outbox(args) => cli::run(operator, args).await,
        Tool::Consumers(args) => consumers::run(operator, args).await,
    }
}

/// Parses `args` as the arguments of one operator command (`T`), as clap does after
/// `room-service <command>`: for the commands' own tests.
#[cfg(test)]
fn parse_args<T: clap::Args>(args: &[&str]) -> Result<T, clap::Error> {
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Command<T: clap::Args> {
        #[command(flatten)]
        args: T,
    }
    Command::<T>::try_parse_from(std::iter::once(&"room-service").chain(args)).map(|command| command.args)
}
