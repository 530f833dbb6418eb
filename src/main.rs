//! `room-service`: parse the command line, load the config, compose the publish stack, and
//! hand it to the app. Everything else lives in the library.

use std::path::PathBuf;

use anyhow::Context;
use clap::{CommandFactory, Parser, Subcommand};
use room_service::config::{self, Settings};
use room_service::redis_conn::RedisConn;
use room_service::{admin, app, store, telemetry};

/// mimalloc, not glibc's malloc: the service allocates and frees many small buffers a command
/// (JSON, HTTP, SQL binds); glibc's allocator took ~12 % of B1's CPU samples, and with mimalloc
/// B1 spends ~17 % less CPU a command in the service's process (docs/BENCHMARKS.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Rooms of a live-streaming app, with every event pushed to Tencent Cloud IM.
#[derive(Debug, Parser)]
#[command(name = "room-service", version = room_service::build::long_version())]
struct Cli {
    /// Config file (YAML); every key can be overridden by ROOM_SERVICE__SECTION__KEY.
    #[arg(long, global = true, default_value = config::DEFAULT_CONFIG_PATH)]
    config: PathBuf,
    #[command(subcommand)]
    command: Option<Cmd>,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Run the service (the default).
    Serve,
    /// Run the database migrations and exit.
    Migrate,
    /// Inspect and repair the outbox: stats, list, show, requeue, purge-delivered.
    Outbox(admin::OutboxArgs),
    /// Inspect and move the event consumers (webhook, audit): list, reset, retire.
    Consumers(admin::ConsumersArgs),
    /// Work with the configuration file.
    #[command(subcommand)]
    Config(ConfigCmd),
    /// Print a shell completion script, e.g. `room-service completions bash > /etc/bash_completion.d/room-service`.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
}

#[derive(Debug, Subcommand)]
enum ConfigCmd {
    /// Validate the config file (and the ROOM_SERVICE__* overrides) and print the effective
    /// settings, secrets redacted; exits non-zero naming every key at fault.
    Check,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command.unwrap_or(Cmd::Serve) {
        Cmd::Completions { shell } => {
            clap_complete::generate(shell, &mut Cli::command(), "room-service", &mut std::io::stdout());
            Ok(())
        }
        Cmd::Config(ConfigCmd::Check) => {
            let (settings, yaml) = config::check(&cli.config).map_err(invalid)?;
            println!("# {}: valid (database {})", cli.config.display(), settings.database.redacted_url());
            print!("{yaml}");
            Ok(())
        }
        Cmd::Migrate => {
            let settings = load_for_tool(&cli.config)?;
            let db = &settings.database;
            let repo = store::connect(db.url.expose(), db.max_connections, true).await?;
            repo.close().await;
            tracing::warn!(database = %db.redacted_url(), "Migrations applied");
            Ok(())
        }
        Cmd::Outbox(args) => run_tool(&cli.config, admin::Tool::Outbox(args)).await,
        Cmd::Consumers(args) => run_tool(&cli.config, admin::Tool::Consumers(args)).await,
        Cmd::Serve => {
            let settings = config::load(&cli.config).map_err(invalid)?;
            let traces = telemetry::init_logging_and_traces(
                &settings.log,
                settings.telemetry.otlp.as_ref(),
                &settings.node_id,
            )
            .map_err(|e| anyhow::anyhow!(e))?;
            tracing::info!(source = ?settings.source, node_id = %settings.node_id, "Configuration loaded");
            // One Redis handle per node (connected lazily: Redis may be down now).
            let redis = RedisConn::from_settings(settings.redis.as_ref()).context("redis.url")?;
            let publisher = app::publisher(&settings)?;
            let served = app::serve(settings, publisher, redis).await;
            // Last, after the stop sequence: the spans of the last commands are exported too.
            if let Some(traces) = traces {
                traces.shutdown(std::time::Duration::from_secs(5)).await;
            }
            served
        }
    }
}

fn invalid(error: config::ConfigError) -> anyhow::Error {
    anyhow::anyhow!("invalid configuration: {error}")
}

/// The configuration of an operator command: the file must exist (the defaults would point at
/// another database), and logs stay at `warn` (audit lines at `info`) unless `RUST_LOG` asks
/// for more, so the command's own output is what the operator reads.
fn load_for_tool(path: &std::path::Path) -> anyhow::Result<Settings> {
    let settings = config::load_existing(path).map_err(invalid)?;
    let quiet = config::LogSettings { level: telemetry::TOOL_LOG_LEVEL.into(), ..settings.log.clone() };
    telemetry::init_logging(&quiet);
    Ok(settings)
}

/// Runs an operator command on the service's database, with the consumers its configuration
/// enables (a purge keeps the rows they have not passed). Never migrates nor creates a
/// database: the operator tool works on the service's.
async fn run_tool(path: &std::path::Path, tool: admin::Tool) -> anyhow::Result<()> {
    let settings = load_for_tool(path)?;
    let db = &settings.database;
    let repo = store::connect_existing(db.url.expose(), 2)
        .await
        .with_context(|| format!("opening database {}", db.redacted_url()))?;
    let consumers = settings.consumers.enabled_names();
    let operator = admin::Operator {
        repo: repo.as_ref(),
        enabled_consumers: &consumers,
        out: &mut std::io::stdout().lock(),
    };
    let result = admin::run(operator, tool).await;
    repo.close().await;
    result
}
