//! `room-service-fakes`: the fake Tencent IM and the fake wallet as servers of their own (tests,
//! demos, benchmarks, compose). Both stop on SIGTERM or Ctrl-C, as `room-service serve` does.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};
use room_service::{app, config, telemetry};
use room_service_fakes::fake_im::{self, FakeImOptions};
use room_service_fakes::fake_wallet::{self, FakeWalletOptions};

/// Fakes of the services room-service calls.
#[derive(Debug, Parser)]
#[command(name = "room-service-fakes", version)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Run the fake Tencent IM server (tests, demos, benchmarks).
    FakeIm(FakeImArgs),
    /// Run the fake wallet server (tests, demos, compose).
    FakeWallet(FakeWalletArgs),
}

#[derive(Debug, clap::Args)]
struct FakeImArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:9000")]
    listen: SocketAddr,
    /// The SDKAppID accepted.
    #[arg(long, default_value_t = 1_400_000_000)]
    sdk_app_id: u64,
    /// Key usersigs must be signed with.
    #[arg(long, env = "ROOM_SERVICE_FAKE_IM_SECRET_KEY", hide_env_values = true)]
    secret_key: String,
    /// The admin identifier accepted.
    #[arg(long = "admin", default_value = "administrator")]
    admin_identifier: String,
    /// Latency added to every send_group_msg call, e.g. "20ms".
    #[arg(long, default_value = "0ms", value_parser = humantime::parse_duration)]
    latency: Duration,
    /// Messages per second per group before drops (0 = unlimited).
    #[arg(long, default_value_t = 40)]
    per_group_limit: u32,
    /// Calls per second of each API before error 60007 (0 = unlimited).
    #[arg(long, default_value_t = 200)]
    global_limit: u32,
    /// Accept a message to a group never created, or destroyed. By default the fake refuses it
    /// with 10010, as Tencent does (switch it at run time with POST /fake/require_groups
    /// {"on": bool}).
    #[arg(long)]
    allow_missing_groups: bool,
    /// Most live groups create_group makes before error 10036 (the AVChatRoom quota; default
    /// none).
    #[arg(long)]
    avchatroom_quota: Option<usize>,
    /// Answer ban_group_member / unban_group_member with 10007, like an edition without them.
    #[arg(long)]
    no_ban: bool,
}

#[derive(Debug, clap::Args)]
struct FakeWalletArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:7000")]
    listen: SocketAddr,
    /// Balance of a user the fake has not seen yet (set others with PUT /fake/balances/{user_id}).
    #[arg(long, default_value_t = 0)]
    initial_balance: u64,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    telemetry::init_logging(&config::LogSettings { format: config::LogFormat::Json, level: "info".into() });
    match Cli::parse().command {
        Cmd::FakeIm(args) => run_fake_im(args).await,
        Cmd::FakeWallet(args) => run_fake_wallet(args).await,
    }
}

async fn run_fake_im(args: FakeImArgs) -> anyhow::Result<()> {
    let limit = |n: u32| (n > 0).then_some(n);
    let options = FakeImOptions {
        sdk_app_id: args.sdk_app_id,
        secret_key: args.secret_key,
        admin_identifier: args.admin_identifier,
        latency: args.latency,
        per_group_limit_per_sec: limit(args.per_group_limit),
        global_limit_per_sec: limit(args.global_limit),
        require_groups: !args.allow_missing_groups,
        avchatroom_quota: args.avchatroom_quota,
        ban_enabled: !args.no_ban,
    };
    let listener = tokio::net::TcpListener::bind(args.listen).await.context("binding --listen")?;
    tracing::info!(addr = %args.listen, "Fake Tencent IM listening");
    fake_im::server::serve::<fake_im::FakeState>(listener, options, app::shutdown_signal())
        .await
        .context("fake IM server")
}

async fn run_fake_wallet(args: FakeWalletArgs) -> anyhow::Result<()> {
    let options = FakeWalletOptions { initial_balance: args.initial_balance };
    let listener = tokio::net::TcpListener::bind(args.listen).await.context("binding --listen")?;
    tracing::info!(addr = %args.listen, initial_balance = args.initial_balance, "Fake wallet listening");
    fake_im::server::serve::<fake_wallet::FakeWalletState>(listener, options, app::shutdown_signal())
        .await
        .context("fake wallet server")
}
