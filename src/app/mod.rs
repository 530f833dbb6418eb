//! Lifecycle (SPEC §6): the only place besides `main.rs` that wires concrete types together.
//!
//! Start, in named phases read top to bottom in [`start_with_redis`]: `open_database` (pool,
//! migrations) → in a cluster, `join_cluster` (membership, this node's share of the shard
//! leases) → `Core` (the room service) → `Listeners` (public, admin, gRPC, bound) → `Apis`
//! (their routers over one state) → `Workers` (the background tasks and the lease keeper) →
//! `serve_until_stopped`.
//! Stop: one named sequence, `StopSequence` (its steps are listed there).

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
use crate::api::forward::{Forwarder, hop_limit};
use crate::api::read_limit::ReadLimiter;
use crate::api::readiness::DbPing;
use crate::api::{AppState, Lifecycle, NodeInfo};
use crate::cluster::{LeaseKeeper, Ownership};
use crate::config::Settings;
use crate::grpc::{self, GrpcOptions};
use crate::http::server::ServeOptions;
use crate::http::{self, PublicOptions};
use crate::outbox::sampler;
use crate::publish::tencent::wire::MAX_GROUP_ID_BYTES;
use crate::publish::{Publisher, Quarantine};
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
    let keeper = match settings.cluster.enabled {
        true => Some(join_cluster(&settings, &repo, redis).await?),
        false => None,
    };
    let core = Core::build(&settings, repo, publisher, keeper)?;
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

/// Phase 2 (after joining the cluster, when it is on): what every later phase builds on.
struct Core {
    repo: SharedRepository,
    /// This node's shard leases, in a cluster.
    keeper: Option<LeaseKeeper>,
    /// Which rooms this node serves.
    ownership: Ownership,
    rooms: RoomService,
    publisher: Publisher,
    /// The command path wakes the outbox worker with it when it leaves events pending.
    worker_wake: Arc<Notify>,
    /// The senders whose events go alone (SPEC §13.1), shared by the lanes and the worker.
    quarantine: Arc<Quarantine>,
}

impl Core {
    /// The room service over `repo`, publishing through `publisher`, serving the rooms
    /// `keeper`'s leases give this node (every room without a cluster).
    fn build(
        settings: &Settings,
        repo: SharedRepository,
        publisher: Publisher,
        keeper: Option<LeaseKeeper>,
    ) -> anyhow::Result<Self> {
        let ownership = keeper.as_ref().map_or(Ownership::Single, LeaseKeeper::ownership);
        let worker_wake = Arc::new(Notify::new());
        let quarantine = Arc::new(Quarantine::default());
        let room_options = RoomOptions {
            publish_timeout: settings.outbox_worker.publish_timeout,
            sync_publish_wait: settings.rooms.sync_publish_wait,
            pack: pack_limits(settings),
            max_commit_batch: settings.rooms.max_commit_batch,
            max_room_id_bytes: settings
                .tencent_im
                .as_ref()
                .map(|im| MAX_GROUP_ID_BYTES.saturating_sub(im.group_id_prefix.len())),
            worker_wake: Some(worker_wake.clone()),
            ownership: ownership.clone(),
            wallet: wallet(&settings.wallet)?,
            history: settings.rooms.history,
            in_flight_per_room: settings.im_batch.in_flight_per_room,
            quarantine: quarantine.clone(),
        };
        let rooms = RoomService::new(repo.clone(), publisher.clone(), room_options, system_clock());
        Ok(Self { repo, keeper, ownership, rooms, publisher, worker_wake, quarantine })
    }
}

/// Phase 3: the three listeners, bound (a port in use fails the start here, naming its key).
struct Listeners {
    public: TcpListener,
    admin: TcpListener,
    grpc: TcpListener,
    addr: SocketAddr,
    admin_addr: SocketAddr,
    grpc_addr: SocketAddr,
}

impl Listeners {
    async fn bind(settings: &Settings) -> anyhow::Result<Self> {
        let bind = |key: &'static str, addr: SocketAddr| async move {
            listen(addr).with_context(|| format!("binding {key} {addr}"))
        };
        let public = bind("http.listen", settings.http.listen).await?;
        let admin = bind("http.admin_listen", settings.http.admin_listen).await?;
        let grpc = bind("grpc.listen", settings.grpc.listen).await?;
        let (addr, admin_addr, grpc_addr) = (public.local_addr()?, admin.local_addr()?, grpc.local_addr()?);
        Ok(Self { public, admin, grpc, addr, admin_addr, grpc_addr })
    }
}

/// Connections a listener's kernel queue holds before they are accepted (the kernel caps it at
/// `net.core.somaxconn`): a reconnect herd's connections wait there for the accept loop instead
/// of being dropped and retried a second later (tokio's `TcpListener::bind` queues 1,024).
const LISTEN_BACKLOG: u32 = 4096;

/// A listener on `addr` with [`LISTEN_BACKLOG`] (and `SO_REUSEADDR`, as `TcpListener::bind`).
fn listen(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket =
        if addr.is_ipv4() { tokio::net::TcpSocket::new_v4()? } else { tokio::net::TcpSocket::new_v6()? };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}

/// Phase 4: the public, admin and gRPC APIs over one state, and the lifecycle they report.
struct Apis {
    public: axum::Router,
    admin: axum::Router,
    grpc: axum::Router,
    lifecycle: Lifecycle,
}

impl Apis {
    async fn build(
        settings: &Settings,
        core: &Core,
        listeners: &Listeners,
        metrics: metrics_exporter_prometheus::PrometheusHandle,
    ) -> anyhow::Result<Self> {
        let http_settings = &settings.http;
        let forwarder = core
            .keeper
            .as_ref()
            .map(|k| {
                let body_limit = hop_limit(http_settings.body_limit_bytes);
                Forwarder::new(k.cluster(), http_settings.request_timeout, body_limit)
            })
            .transpose()
            .context("cluster forwarding client")?;
        let url = match settings.cluster.advertise_url.as_str() {
            "" => format!("http://{}", listeners.addr),
            url => url.to_owned(),
        };
        let lifecycle = Lifecycle::default();
        let state = AppState {
            rooms: core.rooms.clone(),
            repo: core.repo.clone(),
            db_ping: DbPing::new(core.repo.clone()),
            lifecycle: lifecycle.clone(),
            metrics: Some(metrics),
            forwarder,
            auth: auth(&settings.auth).await?,
            reads: ReadLimiter::new(settings.rooms.history.reads_per_sec_per_client).map(Arc::new),
            node: NodeInfo { node_id: settings.node_id.clone(), url },
        };
        let public = http::public_router(state.clone(), PublicOptions::from(http_settings));
        let grpc = grpc::router(state.clone(), GrpcOptions::from(http_settings)).context("gRPC services")?;
        let admin = http::admin_router(state, http_settings.admin_token.clone());
        Ok(Self { public, admin, grpc, lifecycle })
    }
}

/// Phase 5: the background tasks — metrics upkeep, presence, the cell janitor, refunds, the
/// backlog sampler, the outbox worker, the consumers, retention — under one cancellation, and
/// the lease keeper under a token of its own (the leases outlive every other task: in-flight
/// commands still commit under them).
struct Workers {
    cancel: CancellationToken,
    tracker: TaskTracker,
    leases: CancellationToken,
    keeper: Option<JoinHandle<()>>,
}

impl Workers {
    fn spawn(
        settings: &Settings,
        core: &Core,
        metrics: metrics_exporter_prometheus::PrometheusHandle,
    ) -> anyhow::Result<Self> {
        let (cancel, tracker) = (CancellationToken::new(), TaskTracker::new());
        let (repo, rooms) = (&core.repo, &core.rooms);
        tracker.spawn(run_metrics_upkeep(metrics, repo.clone(), core.ownership.clone(), cancel.clone()));
        let leases = CancellationToken::new();
        let keeper = core.keeper.clone().map(|k| tokio::spawn(k.run(leases.clone())));
        if settings.presence.enabled {
            let p = &settings.presence;
            let worker =
                presence::run_presence_worker(rooms.clone(), p.stale_after, p.scan_interval, cancel.clone());
            tracker.spawn(worker);
        }
        let janitor =
            presence::run_cell_janitor(rooms.clone(), CELL_SWEEP_INTERVAL, CELL_IDLE_AFTER, cancel.clone());
        tracker.spawn(janitor);
        if settings.wallet.enabled {
            tracker.spawn(presence::run_refund_sweeper(rooms.clone(), REFUND_SWEEP_INTERVAL, cancel.clone()));
        }
        let interval = settings.outbox_worker.stats_interval;
        tracker.spawn(sampler::run_backlog_sampler(repo.clone(), interval, cancel.clone()));
        spawn_outbox_worker(settings, core, &tracker, &cancel);
        spawn_consumers(settings, repo, &tracker, &cancel)?;
        // Retention runs where the outbox worker runs (one purging instance at a time on MySQL),
        // and keeps every event an enabled consumer has not passed, and every event the rooms'
        // history still serves (a row delivered before max_age was committed before it too).
        if let Some(retention) = settings.outbox_worker.retention.filter(|_| settings.outbox_worker.enabled) {
            let retention = retention.max(settings.rooms.history.max_age);
            let options = RetentionOptions {
                consumers: settings.consumers.enabled_names(),
                ..RetentionOptions::new(retention, settings.node_id.clone())
            };
            tracker.spawn(run_retention(repo.clone(), options, cancel.clone()));
        }
        tracker.close();
        Ok(Self { cancel, tracker, leases, keeper })
    }
}

/// Phase 6: serves the three APIs until `RunningApp`'s shutdown token is cancelled, then runs
/// the [`StopSequence`].
fn serve_until_stopped(
    settings: &Settings,
    core: Core,
    listeners: Listeners,
    apis: Apis,
    workers: Workers,
) -> RunningApp {
    let http_settings = &settings.http;
    let Listeners { public, admin, grpc, addr, admin_addr, grpc_addr } = listeners;
    let shutdown = CancellationToken::new();
    let stop = StopSequence {
        grace: http_settings.shutdown_grace,
        workers_bound: settings.outbox_worker.publish_timeout + WORKER_STOP_MARGIN,
        lifecycle: apis.lifecycle,
        stop_http: CancellationToken::new(),
    };
    let admin_server = http::server::serve(
        admin,
        apis.admin,
        ServeOptions::new("admin", http_settings),
        stop.stop_http.clone().cancelled_owned(),
    );
    // Stops with the HTTP listeners; its health service follows readiness meanwhile.
    let grpc_server = http::server::serve(
        grpc,
        apis.grpc,
        ServeOptions::grpc(http_settings),
        stop.stop_http.clone().cancelled_owned(),
    );
    let public_options = ServeOptions::new("public", http_settings);
    let (rooms, repo) = (core.rooms.clone(), core.repo.clone());
    let stopping = shutdown.clone();
    let server = tokio::spawn(async move {
        let until = stop.until_http_stops(stopping, &workers);
        let public_server = http::server::serve(public, apis.public, public_options, until);
        let (public_served, admin_served, grpc_served) =
            tokio::join!(public_server, admin_server, grpc_server);
        StopSequence::after_http(core, workers).await;
        public_served.context("public http server failed")?;
        grpc_served.context("grpc server failed")?;
        admin_served.context("admin http server failed")
    });
    tracing::info!(%addr, %admin_addr, %grpc_addr, node_id = %settings.node_id, "Serving");
    RunningApp { addr, admin_addr, grpc_addr, rooms, repo, shutdown, server }
}

/// The stop sequence (SPEC §6), in order:
///
/// 1. leave: `/readyz` answers 503 for `http.shutdown_grace` while commands are still served
///    (the load balancer moves traffic away);
/// 2. drain: new commands answer 503;
/// 3. stop the workers and wait for them (bounded by one publish timeout and a margin);
/// 4. stop the HTTP and gRPC listeners together (in-flight commands finish and persist;
///    bounded by `http.shutdown_timeout`; metrics stay scrapeable until then);
/// 5. flush the delivery marks of the last commands;
/// 6. release the shard leases and leave the cluster;
/// 7. close the pool.
///
/// The pool is never closed while a worker may still mark a row; the leases are kept until no
/// command can commit.
struct StopSequence {
    grace: Duration,
    workers_bound: Duration,
    lifecycle: Lifecycle,
    stop_http: CancellationToken,
}

impl StopSequence {
    /// Steps 1–4, once `shutdown` is cancelled: returns when the listeners are to stop.
    async fn until_http_stops(self, shutdown: CancellationToken, workers: &Workers) {
        shutdown.cancelled().await;
        if !self.grace.is_zero() {
            tracing::info!(grace = ?self.grace, "Leaving: /readyz answers 503, commands still served");
            self.lifecycle.start_leaving();
            tokio::time::sleep(self.grace).await;
        }
        tracing::info!("Draining: refusing new commands, stopping workers");
        self.lifecycle.start_draining();
        workers.cancel.cancel();
        if tokio::time::timeout(self.workers_bound, workers.tracker.wait()).await.is_err() {
            tracing::warn!("Workers did not stop in time; shutting down HTTP meanwhile");
        }
        self.stop_http.cancel();
    }

    /// Steps 5–7, once every listener has stopped.
    async fn after_http(core: Core, workers: Workers) {
        // Every worker has stopped (each step of theirs is bounded) before the pool closes: a
        // worker still marking rows must not find the pool gone.
        workers.tracker.wait().await;
        core.rooms.shutdown().await;
        workers.leases.cancel();
        if let Some(task) = workers.keeper {
            let _ = task.await;
        }
        if let Some(keeper) = &core.keeper
            && let Err(error) = keeper.leave().await
        {
            tracing::warn!(%error, "Cannot release the shard leases; they expire by themselves");
        }
        core.repo.close().await;
        tracing::info!("Stopped");
    }
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
