//! What runs beside the listeners: joining the cluster, the background tasks of phase 5
//! ([`Workers`]: the metrics upkeep, presence, the cell janitor, refunds, the backlog sampler,
//! the outbox worker, the other consumers, retention, the lease keeper), and the signals that
//! stop it all.

use std::time::Duration;

use anyhow::Context;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::phases::Core;
use crate::admin::{RetentionOptions, run_retention};
use crate::cluster::{Directory, LeaseKeeper, Ownership};
use crate::config::{ConsumerSettings, Settings};
use crate::consumer::audit::AuditSink;
use crate::consumer::batch::Batcher;
use crate::consumer::webhook::WebhookSink;
use crate::consumer::{self, Consumer, ConsumerName, ConsumerOptions};
use crate::outbox::{OutboxWorker, sampler};
use crate::redis_conn::RedisConn;
use crate::room::presence;
use crate::store::SharedRepository;
use crate::telemetry;

/// How often idle room cells are dropped from memory, and after how long unused.
const CELL_SWEEP_INTERVAL: Duration = Duration::from_secs(60);
const CELL_IDLE_AFTER: Duration = Duration::from_secs(300);
/// How often the gift refunds the wallet has not confirmed are sent again (`wallet.enabled`).
const REFUND_SWEEP_INTERVAL: Duration = Duration::from_secs(30);

/// Phase 5: the background tasks — metrics upkeep, presence, the cell janitor, refunds, the
/// backlog sampler, the outbox worker, the consumers, retention — under one cancellation, and
/// the lease keeper under a token of its own (the leases outlive every other task: in-flight
/// commands still commit under them).
pub(super) struct Workers {
    pub(super) cancel: CancellationToken,
    pub(super) tracker: TaskTracker,
    pub(super) leases: CancellationToken,
    pub(super) keeper: Option<JoinHandle<()>>,
}

impl Workers {
    pub(super) fn spawn(
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
        if let Some(idle_after) = settings.rooms.idle_close_after {
            tracker.spawn(presence::idle::run_idle_closer(rooms.clone(), idle_after, cancel.clone()));
        }
        let ttl = settings.rooms.seat_request_ttl;
        tracker.spawn(presence::seats::run_seat_expiry(rooms.clone(), ttl, cancel.clone()));
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

/// Joins the cluster before serving: membership, then this node's share of the shards.
pub(super) async fn join_cluster(
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

/// Starts the outbox worker (when enabled) over `core`'s store and publish stack, woken by its
/// command path and sharing its quarantine.
pub(super) fn spawn_outbox_worker(
    settings: &Settings,
    core: &Core,
    tracker: &TaskTracker,
    cancel: &CancellationToken,
) {
    if !settings.outbox_worker.enabled {
        tracing::info!("Outbox worker disabled");
        return;
    }
    let options = settings.outbox_worker.clone();
    let (repo, publisher) = (core.repo.clone(), core.publisher.clone());
    let mut worker = OutboxWorker::new(repo, publisher, settings.node_id.clone(), options)
        .with_per_room_rate(settings.im_rate_limit.per_group_per_sec)
        .with_pack_limits(super::pack_limits(settings))
        .with_in_flight_per_room(settings.im_batch.in_flight_per_room)
        .with_quarantine(core.quarantine.clone())
        .with_permits(core.permits.clone())
        .with_groups(super::phases::groups(settings))
        .with_waker(core.worker_wake.clone());
    if settings.cluster.enabled {
        // A shard's rows are relayed by its owner; a dead owner's shards move within a TTL,
        // so a row still unclaimed after two TTLs has lost its owner some other way.
        worker = worker.with_ownership(core.ownership.clone(), settings.cluster.lease_ttl * 2);
    }
    let cancel = cancel.clone();
    tracker.spawn(async move { worker.run_outbox_worker(cancel).await });
}

/// Starts the enabled event consumers (webhook, audit), each through its own stack.
pub(super) fn spawn_consumers(
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
        lease_ttl: consumer.lease(),
        backoff: settings.outbox_worker.clone(),
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

pub(super) async fn run_metrics_upkeep(
    handle: metrics_exporter_prometheus::PrometheusHandle,
    repo: SharedRepository,
    ownership: Ownership,
    cancel: CancellationToken,
) {
    let mut tick = tokio::time::interval(Duration::from_secs(5));
    while cancel.run_until_cancelled(tick.tick()).await.is_some() {
        telemetry::sample_process();
        crate::store::pool_metrics::record_pool_stats(repo.pool_stats());
        let owned = ownership.held_shards().map_or(usize::from(crate::cluster::SHARDS), |s| s.len());
        metrics::gauge!(telemetry::names::CLUSTER_SHARDS_OWNED).set(owned as f64);
        handle.run_upkeep();
    }
}

/// Completes on the first SIGTERM (what `docker stop` and orchestrators send) or SIGINT
/// (Ctrl-C): the stop signal of `serve` and of the fakes (`fake-im`, `fake-wallet`), which run
/// as a container's first process too.
pub async fn shutdown_signal() {
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
