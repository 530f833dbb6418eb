//! Lifecycle (SPEC §6): the only place besides `main.rs` that wires concrete types together.
//!
//! Start, in named phases read top to bottom in [`start_with_redis`]: `open_database` (pool,
//! migrations) → in a cluster, `join_cluster` (membership, this node's share of the shard
//! leases) → `Core` (the room service) → `Listeners` (public, admin, gRPC, bound) → `Apis`
//! (their routers over one state) → `Workers` (the background tasks and the lease keeper) →
//! `serve_until_stopped`.
//! Stop: one named sequence, `StopSequence` (its steps are listed there).
//!
//! Where each lives: phase 1 and the running app here; `Core`, `Listeners` and `Apis` in
//! `phases`; `join_cluster` and `Workers` in `tasks`; `serve_until_stopped` and `StopSequence`
//! in `stop`; in `wiring`, the publish stack `main.rs` serves with and the wallet and the
//! authenticator the phases build; in `series`, the series exported at 0 from the start.

use std::net::SocketAddr;

use anyhow::Context;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::config::Settings;
use crate::publish::Publisher;
use crate::redis_conn::RedisConn;
use crate::room::RoomService;
use crate::store::{self, SharedRepository};
use crate::telemetry;

mod phases;
mod series;
mod stop;
mod tasks;
mod wiring;

use phases::{Apis, Core, Listeners};
use stop::serve_until_stopped;
pub use tasks::shutdown_signal;
use tasks::{Workers, join_cluster};
pub use wiring::{auth, im_leaf, im_stack, pack_limits, permits, publisher, rate_limit, wallet};

/// A started service.
pub struct RunningApp {
    /// The bound address of the public API.
    pub addr: SocketAddr,
    /// The bound address of the admin listener.
    pub admin_addr: SocketAddr,
    /// The bound address of the gRPC listener.
    pub grpc_addr: SocketAddr,
    /// The room service (tests drive it directly too).
    pub rooms: RoomService,
    /// The repository.
    pub repo: SharedRepository,
    shutdown: CancellationToken,
    server: JoinHandle<anyhow::Result<()>>,
}

impl RunningApp {
    /// Runs the stop sequence and waits for it to finish.
    pub async fn stop(self) -> anyhow::Result<()> {
        self.shutdown.cancel();
        self.server.await.context("server task panicked")?
    }

    /// Waits until the service stops (after [`RunningApp::shutdown_token`] is cancelled).
    pub async fn wait(self) -> anyhow::Result<()> {
        self.server.await.context("server task panicked")?
    }

    /// Cancelling this token starts the stop sequence.
    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }
}

/// Starts the service with `publisher` as the publish stack and returns once it is serving;
/// opens its own Redis handle when `redis.url` is set.
pub async fn start(settings: Settings, publisher: Publisher) -> anyhow::Result<RunningApp> {
    let redis = RedisConn::from_settings(settings.redis.as_ref()).context("redis.url")?;
    start_with_redis(settings, publisher, redis).await
}

/// [`start`] sharing `redis`, the node's one Redis handle (the publish stack's quota uses it
/// too). The start, phase by phase (each phase's failure names what it could not do, and
/// nothing is served before the last).
pub async fn start_with_redis(
    settings: Settings,
    publisher: Publisher,
    redis: Option<RedisConn>,
) -> anyhow::Result<RunningApp> {
    let repo = open_database(&settings).await?;
    let metrics = telemetry::install_metrics();
    series::register_zero_series(&settings);
    let permits = permits(&settings, redis.as_ref());
    let keeper = match settings.cluster.enabled {
        true => Some(join_cluster(&settings, &repo, redis).await?),
        false => None,
    };
    let core = Core::build(&settings, repo, publisher, permits, keeper)?;
    let listeners = Listeners::bind(&settings).await?;
    let apis = Apis::build(&settings, &core, &listeners, metrics.clone()).await?;
    let workers = Workers::spawn(&settings, &core, metrics)?;
    Ok(serve_until_stopped(&settings, core, listeners, apis, workers))
}

/// Phase 1: the database pool, migrated when `database.run_migrations`.
async fn open_database(settings: &Settings) -> anyhow::Result<SharedRepository> {
    let db = &settings.database;
    store::connect(db.url.expose(), db.max_connections, db.run_migrations)
        .await
        .with_context(|| format!("opening database {}", db.redacted_url()))
}

/// Starts the service and runs it until SIGTERM or SIGINT, then stops it in order.
pub async fn serve(settings: Settings, publisher: Publisher, redis: Option<RedisConn>) -> anyhow::Result<()> {
    let app = start_with_redis(settings, publisher, redis).await?;
    let token = app.shutdown_token();
    tokio::spawn(async move {
        shutdown_signal().await;
        token.cancel();
    });
    app.wait().await
}
