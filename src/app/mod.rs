//! Lifecycle (SPEC §6): the only place besides `main.rs` that wires concrete types together.
//!
//! Start: database pool (+ migrations) → Redis handle (lazy) → in a cluster, join: membership
//! and this node's share of the shard leases → room service → HTTP listeners bound (public and
//! admin) and the gRPC listener → worker cancellation token → lease keeper, presence worker, outbox worker (if
//! enabled) → serve.
//! Stop: `/readyz` answers 503 for `http.shutdown_grace` while commands are still served (the
//! load balancer moves traffic away) → mark draining (new commands answer 503) → cancel the
//! workers → wait for them (bounded) → graceful shutdown of the HTTP and gRPC listeners (in-flight
//! commands finish and persist; bounded by `http.shutdown_timeout`) → flush the delivery marks
//! → release the shard leases and leave the cluster → close the pool. The pool is never closed
//! while a worker may still mark a row; the leases are kept until no command can commit.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::net::TcpListener;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::admin::{RetentionOptions, run_retention};
use crate::cluster::{LeaseKeeper, Ownership};
use crate::config::Settings;
use crate::grpc::{self, GrpcOptions};
use crate::http::forward::Forwarder;
use crate::http::server::ServeOptions;
use crate::http::{self, AppState, Lifecycle, NodeInfo, PublicOptions};
use crate::outbox::sampler;
use crate::publish::Publisher;
use crate::publish::tencent::wire::MAX_GROUP_ID_BYTES;
use crate::redis_conn::RedisConn;
use crate::room::{RoomOptions, RoomService, presence, system_clock};
use crate::store::{self, SharedRepository};
use crate::telemetry;

mod series;
mod tasks;
mod wiring;

pub use tasks::shutdown_signal;
use tasks::{join_cluster, run_metrics_upkeep, spawn_consumers, spawn_outbox_worker};
pub use wiring::{auth, im_leaf, im_stack, pack_limits, publisher, rate_limit, rate_limit_layer, wallet};

/// Extra time granted to workers beyond one publish timeout when stopping.
const WORKER_STOP_MARGIN: Duration = Duration::from_secs(5);

/// How often idle room cells are dropped from memory, and after how long unused.
const CELL_SWEEP_INTERVAL: Duration = Duration::from_secs(60);
const CELL_IDLE_AFTER: Duration = Duration::from_secs(300);
/// How often the gift refunds the wallet has not confirmed are sent again (`wallet.enabled`).
const REFUND_SWEEP_INTERVAL: Duration = Duration::from_secs(30);

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
/// too).
pub async fn start_with_redis(
    settings: Settings,
    publisher: Publisher,
    redis: Option<RedisConn>,
) -> anyhow::Result<RunningApp> {
    let db = &settings.database;
    let repo = store::connect(db.url.expose(), db.max_connections, db.run_migrations)
        .await
        .with_context(|| format!("opening database {}", db.redacted_url()))?;
    let metrics = telemetry::install_metrics();
    series::register_zero_series(&settings);
    let keeper = match settings.cluster.enabled {
        true => Some(join_cluster(&settings, &repo, redis.clone()).await?),
        false => None,
    };
    let ownership = keeper.as_ref().map_or(Ownership::Single, LeaseKeeper::ownership);
    let publish_timeout = settings.outbox_worker.publish_timeout;
    // The command path wakes the worker when it leaves events pending.
    let worker_wake = Arc::new(Notify::new());
    let room_options = RoomOptions {
        publish_timeout,
        sync_publish_wait: settings.rooms.sync_publish_wait,
        pack: pack_limits(&settings),
        max_commit_batch: settings.rooms.max_commit_batch,
        max_room_id_bytes: settings
            .tencent_im
            .as_ref()
            .map(|im| MAX_GROUP_ID_BYTES.saturating_sub(im.group_id_prefix.len())),
        worker_wake: Some(worker_wake.clone()),
        ownership: ownership.clone(),
        wallet: wallet(&settings.wallet)?,
    };
    let rooms = RoomService::new(repo.clone(), publisher.clone(), room_options, system_clock());
    let http_settings = &settings.http;
    let listener = TcpListener::bind(http_settings.listen)
        .await
        .with_context(|| format!("binding http.listen {}", http_settings.listen))?;
    let admin_listener = TcpListener::bind(http_settings.admin_listen)
        .await
        .with_context(|| format!("binding http.admin_listen {}", http_settings.admin_listen))?;
    let grpc_listener = TcpListener::bind(settings.grpc.listen)
        .await
        .with_context(|| format!("binding grpc.listen {}", settings.grpc.listen))?;
    let addr = listener.local_addr()?;
    let admin_addr = admin_listener.local_addr()?;
    let grpc_addr = grpc_listener.local_addr()?;
    let lifecycle = Lifecycle::default();
    let auth = auth(&settings.auth).await?;
    let state = AppState {
        rooms: rooms.clone(),
        repo: repo.clone(),
        db_ping: crate::http::readiness::DbPing::new(repo.clone()),
        lifecycle: lifecycle.clone(),
        metrics: Some(metrics.clone()),
        forwarder: keeper
            .as_ref()
            .map(|k| {
                Forwarder::new(
                    k.cluster(),
                    http_settings.request_timeout,
                    http_settings.body_limit_bytes.max(crate::http::BATCH_HEARTBEAT_BYTES),
                )
            })
            .transpose()
            .context("cluster forwarding client")?,
        auth,
        node: NodeInfo {
            node_id: settings.node_id.clone(),
            url: match settings.cluster.advertise_url.as_str() {
                "" => format!("http://{addr}"),
                url => url.to_owned(),
            },
        },
    };
    let public = http::public_router(state.clone(), PublicOptions::from(http_settings));
    let grpc_router =
        grpc::router(state.clone(), GrpcOptions::from(http_settings)).context("gRPC services")?;
    let admin = http::admin_router(state, http_settings.admin_token.clone());

    let workers = CancellationToken::new();
    let tracker = TaskTracker::new();
    tracker.spawn(run_metrics_upkeep(metrics, repo.clone(), ownership.clone(), workers.clone()));
    // The leases are kept until HTTP has stopped: in-flight commands still commit under them.
    let leases = CancellationToken::new();
    let keeper_task = keeper.clone().map(|k| tokio::spawn(k.run(leases.clone())));
    if settings.presence.enabled {
        let p = &settings.presence;
        tracker.spawn(presence::run_presence_worker(
            rooms.clone(),
            p.stale_after,
            p.scan_interval,
            workers.clone(),
        ));
    }
    tracker.spawn(presence::run_cell_janitor(
        rooms.clone(),
        CELL_SWEEP_INTERVAL,
        CELL_IDLE_AFTER,
        workers.clone(),
    ));
    if settings.wallet.enabled {
        tracker.spawn(presence::run_refund_sweeper(rooms.clone(), REFUND_SWEEP_INTERVAL, workers.clone()));
    }
    tracker.spawn(sampler::run_backlog_sampler(
        repo.clone(),
        settings.outbox_worker.stats_interval,
        workers.clone(),
    ));
    spawn_outbox_worker(&settings, &repo, worker_wake, &publisher, ownership.clone(), &tracker, &workers);
    spawn_consumers(&settings, &repo, &tracker, &workers)?;
    // Retention runs where the outbox worker runs (one purging instance at a time on MySQL),
    // and keeps every event an enabled consumer has not passed.
    if let Some(retention) = settings.outbox_worker.retention.filter(|_| settings.outbox_worker.enabled) {
        let options = RetentionOptions {
            consumers: settings.consumers.enabled_names(),
            ..RetentionOptions::new(retention, settings.node_id.clone())
        };
        tracker.spawn(run_retention(repo.clone(), options, workers.clone()));
    }
    tracker.close();

    let shutdown = CancellationToken::new();
    let grace = http_settings.shutdown_grace;
    // Both listeners shut down together once the workers stopped (metrics stay scrapeable
    // while draining), so a stop takes at most one http.shutdown_timeout.
    let stop_http = CancellationToken::new();
    let stop_workers = {
        let shutdown = shutdown.clone();
        let stop_http = stop_http.clone();
        let lifecycle = lifecycle.clone();
        let tracker = tracker.clone();
        async move {
            shutdown.cancelled().await;
            if !grace.is_zero() {
                tracing::info!(grace = ?grace, "Leaving: /readyz answers 503, commands still served");
                lifecycle.start_leaving();
                tokio::time::sleep(grace).await;
            }
            tracing::info!("Draining: refusing new commands, stopping workers");
            lifecycle.start_draining();
            workers.cancel();
            if tokio::time::timeout(publish_timeout + WORKER_STOP_MARGIN, tracker.wait()).await.is_err() {
                tracing::warn!("Workers did not stop in time; shutting down HTTP meanwhile");
            }
            stop_http.cancel();
        }
    };
    let admin_server = http::server::serve(
        admin_listener,
        admin,
        ServeOptions::new("admin", http_settings),
        stop_http.clone().cancelled_owned(),
    );
    // Stops with the HTTP listeners; its health service follows readiness meanwhile.
    let grpc_server = http::server::serve(
        grpc_listener,
        grpc_router,
        ServeOptions::grpc(http_settings),
        stop_http.clone().cancelled_owned(),
    );
    let public_options = ServeOptions::new("public", http_settings);
    let server_repo = repo.clone();
    let server_rooms = rooms.clone();
    let server = tokio::spawn(async move {
        let public_server = http::server::serve(listener, public, public_options, stop_workers);
        let (public_served, admin_served, grpc_served) =
            tokio::join!(public_server, admin_server, grpc_server);
        // Every worker has stopped (each step of theirs is bounded) before the pool closes: a
        // worker still marking rows must not find the pool gone.
        tracker.wait().await;
        // The last commands have answered: write their delivery marks before the pool closes.
        server_rooms.shutdown().await;
        leases.cancel();
        if let Some(task) = keeper_task {
            let _ = task.await;
        }
        if let Some(keeper) = &keeper
            && let Err(error) = keeper.leave().await
        {
            tracing::warn!(%error, "Cannot release the shard leases; they expire by themselves");
        }
        server_repo.close().await;
        tracing::info!("Stopped");
        public_served.context("public http server failed")?;
        grpc_served.context("grpc server failed")?;
        admin_served.context("admin http server failed")
    });
    tracing::info!(%addr, %admin_addr, %grpc_addr, node_id = %settings.node_id, "Serving");
    Ok(RunningApp { addr, admin_addr, grpc_addr, rooms, repo, shutdown, server })
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
