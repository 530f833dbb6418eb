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
use tower::util::Either;

use crate::admin::{RetentionOptions, run_retention};
use crate::cluster::{Directory, LeaseKeeper, Ownership};
use crate::config::{ConsumerSettings, Settings, TencentImSettings, WalletSettings};
use crate::consumer::audit::AuditSink;
use crate::consumer::batch::Batcher;
use crate::consumer::webhook::WebhookSink;
use crate::consumer::{self, Consumer, ConsumerName, ConsumerOptions};
use crate::grpc::{self, GrpcOptions};
use crate::http::forward::Forwarder;
use crate::http::server::ServeOptions;
use crate::http::{self, AppState, Lifecycle, NodeInfo, PublicOptions};
use crate::outbox::{OutboxWorker, OutboxWorkerOptions, sampler};
use crate::publish::Publisher;
use crate::publish::log_sink::LogSink;
use crate::publish::rate_limit::{ClusterQuota, RateLimitLayer, RateLimitOptions};
use crate::publish::tencent::wire::MAX_GROUP_ID_BYTES;
use crate::publish::tencent::{TencentImOptions, TencentImService};
use crate::redis_conn::RedisConn;
use crate::room::{RoomOptions, RoomService, presence, system_clock};
use crate::store::{self, SharedRepository};
use crate::telemetry;
use crate::wallet::{HttpWallet, HttpWalletOptions, Wallet};

/// TCP connect timeout of the IM client; the whole call is bounded by `publish_timeout`.
const IM_CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// Extra time granted to workers beyond one publish timeout when stopping.
const WORKER_STOP_MARGIN: Duration = Duration::from_secs(5);

/// How often idle room cells are dropped from memory, and after how long unused.
const CELL_SWEEP_INTERVAL: Duration = Duration::from_secs(60);
const CELL_IDLE_AFTER: Duration = Duration::from_secs(300);

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
        max_commit_batch: settings.rooms.max_commit_batch,
        max_room_id_bytes: settings
            .tencent_im
            .enabled
            .then(|| MAX_GROUP_ID_BYTES.saturating_sub(settings.tencent_im.group_id_prefix.len())),
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
    let state = AppState {
        rooms: rooms.clone(),
        repo: repo.clone(),
        lifecycle: lifecycle.clone(),
        metrics: Some(metrics.clone()),
        forwarder: keeper
            .as_ref()
            .map(|k| {
                Forwarder::new(k.cluster(), http_settings.request_timeout, http_settings.body_limit_bytes)
            })
            .transpose()
            .context("cluster forwarding client")?,
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
    let grpc_server = grpc::server::serve(
        grpc_listener,
        grpc_router,
        ServeOptions::new("grpc", http_settings),
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

/// Joins the cluster before serving: membership, then this node's share of the shards.
async fn join_cluster(
    settings: &Settings,
    repo: &SharedRepository,
    redis: Option<RedisConn>,
) -> anyhow::Result<LeaseKeeper> {
    let directory = Directory::new(repo.clone(), redis).await.context("reading the cluster id")?;
    let keeper =
        LeaseKeeper::new(repo.clone(), directory, settings.node_id.clone(), settings.cluster.clone());
    keeper.join().await.context("joining the cluster (shard leases)")?;
    tracing::info!(
        node_id = %settings.node_id,
        url = %settings.cluster.advertise_url,
        shards = keeper.ownership().held_shards().map_or(0, |s| s.len()),
        "Joined the cluster"
    );
    Ok(keeper)
}

fn spawn_outbox_worker(
    settings: &Settings,
    repo: &SharedRepository,
    wake: Arc<Notify>,
    publisher: &Publisher,
    ownership: Ownership,
    tracker: &TaskTracker,
    cancel: &CancellationToken,
) {
    if !settings.outbox_worker.enabled {
        tracing::info!("Outbox worker disabled");
        return;
    }
    let options = OutboxWorkerOptions {
        per_room_rate: settings.im_rate_limit.per_group_per_sec,
        ..OutboxWorkerOptions::from(&settings.outbox_worker)
    };
    let mut worker = OutboxWorker::new(repo.clone(), publisher.clone(), settings.node_id.clone(), options)
        .with_waker(wake);
    if settings.cluster.enabled {
        // A shard's rows are relayed by its owner; a dead owner's shards move within a TTL,
        // so a row still unclaimed after two TTLs has lost its owner some other way.
        worker = worker.with_ownership(ownership, settings.cluster.lease_ttl * 2);
    }
    let cancel = cancel.clone();
    tracker.spawn(async move { worker.run_outbox_worker(cancel).await });
}

/// Starts the enabled event consumers (webhook, audit), each through its own stack.
fn spawn_consumers(
    settings: &Settings,
    repo: &SharedRepository,
    tracker: &TaskTracker,
    cancel: &CancellationToken,
) -> anyhow::Result<()> {
    let consumers = &settings.consumers;
    let options = |name: ConsumerName, consumer: &ConsumerSettings| ConsumerOptions {
        name,
        node_id: settings.node_id.clone(),
        batch_size: consumer.batch_size,
        poll_interval: consumers.poll_interval,
        gap_grace: consumers.gap_grace,
        lease_ttl: consumer::stack::lease_ttl(consumer),
        backoff: OutboxWorkerOptions::from(&settings.outbox_worker),
    };
    if let Some(webhook) = &consumers.webhook {
        let sink = WebhookSink::new(&webhook.url, webhook.secret.clone(), webhook.consumer.timeout)
            .context("consumers.webhook")?;
        let batcher = Batcher::new(sink);
        let stack = consumer::stack::layered(&webhook.consumer, batcher.clone());
        let consumer =
            Consumer::new(repo.clone(), stack, batcher, options(ConsumerName::Webhook, &webhook.consumer));
        tracker.spawn(consumer.run(cancel.clone()));
    }
    if let Some(audit) = &consumers.audit {
        let batcher = Batcher::new(AuditSink::new(repo.clone(), audit.timeout));
        let stack = consumer::stack::layered(audit, batcher.clone());
        let consumer = Consumer::new(repo.clone(), stack, batcher, options(ConsumerName::Audit, audit));
        tracker.spawn(consumer.run(cancel.clone()));
    }
    Ok(())
}

async fn run_metrics_upkeep(
    handle: metrics_exporter_prometheus::PrometheusHandle,
    repo: SharedRepository,
    ownership: Ownership,
    cancel: CancellationToken,
) {
    let mut tick = tokio::time::interval(Duration::from_secs(5));
    while cancel.run_until_cancelled(tick.tick()).await.is_some() {
        telemetry::sample_runtime(repo.as_ref());
        let owned = ownership.held_shards().map_or(usize::from(crate::cluster::SHARDS), |s| s.len());
        metrics::gauge!(telemetry::names::CLUSTER_SHARDS_OWNED).set(owned as f64);
        handle.run_upkeep();
    }
}

async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(error) = tokio::signal::ctrl_c().await {
            tracing::error!(%error, "Cannot listen for SIGINT");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(error) => {
                tracing::error!(%error, "Cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = terminate => {}
    }
}

/// The rate-limit layer of the publish stack: Tencent's limits apply to the IM client only, so
/// there is none when IM is disabled (the log sink takes any rate). With `redis` (the node's
/// handle, when `redis.url` is set) the app-wide limit is shared by the cluster; without it
/// each node takes `global_per_sec / cluster.expected_nodes` (all of it on a single node).
pub fn rate_limit_layer(settings: &Settings, redis: Option<&RedisConn>) -> Option<RateLimitLayer> {
    settings.tencent_im.enabled.then(|| {
        let (app, nodes) = (settings.tencent_im.sdk_app_id, settings.cluster.expected_nodes);
        let mut options = rate_limit(settings);
        if redis.is_none() {
            options.global_per_sec = (options.global_per_sec / nodes.max(1)).max(1);
        }
        let quota = redis.map(|redis| ClusterQuota::new(redis.clone(), app, nodes));
        RateLimitLayer::new(options).with_cluster_quota(quota)
    })
}

/// The rate limits of the publish stack for `settings` (`im_rate_limit.*`, and the pause after
/// a rate-limited answer).
pub fn rate_limit(settings: &Settings) -> RateLimitOptions {
    let limits = &settings.im_rate_limit;
    RateLimitOptions {
        global_per_sec: limits.global_per_sec,
        per_group_per_sec: limits.per_group_per_sec,
        worker_share: limits.worker_share,
        pause: settings.outbox_worker.rate_limit_pause,
    }
}

/// The leaf of the publish stack for `settings`: the Tencent IM client, or the log sink when
/// `tencent_im.enabled` is false (the same stack either way).
pub fn im_leaf(settings: &TencentImSettings) -> anyhow::Result<Either<TencentImService, LogSink>> {
    if !settings.enabled {
        return Ok(Either::Right(LogSink::new()));
    }
    let options = TencentImOptions {
        base_url: settings.base_url.clone(),
        sdk_app_id: settings.sdk_app_id,
        admin_identifier: settings.admin_identifier.clone(),
        secret_key: settings.secret_key.clone(),
        group_id_prefix: settings.group_id_prefix.clone(),
        usersig_ttl: settings.usersig_ttl,
        connect_timeout: IM_CONNECT_TIMEOUT,
    };
    Ok(Either::Left(TencentImService::new(options).context("tencent_im")?))
}

/// The wallet gifts are paid from: the HTTP client when `wallet.enabled`, else none (gifts
/// are free).
pub fn wallet(settings: &WalletSettings) -> anyhow::Result<Option<Arc<dyn Wallet>>> {
    if !settings.enabled {
        return Ok(None);
    }
    let options = HttpWalletOptions { base_url: settings.base_url.clone(), timeout: settings.timeout };
    let wallet = HttpWallet::new(options).context("wallet")?;
    tracing::info!(base_url = %settings.base_url, timeout = ?settings.timeout, "Gifts are paid through the wallet");
    Ok(Some(Arc::new(wallet)))
}
