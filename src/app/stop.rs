//! Phase 6 and the stop: the three APIs served until the shutdown token is cancelled
//! ([`serve_until_stopped`]), then the [`StopSequence`] (SPEC §6), whose steps are listed there.

use std::time::Duration;

use anyhow::Context;
use tokio_util::sync::CancellationToken;

use super::RunningApp;
use super::phases::{Apis, Core, Listeners};
use super::tasks::Workers;
use crate::api::Lifecycle;
use crate::config::Settings;
use crate::http;
use crate::http::server::ServeOptions;

/// Extra time granted to workers beyond one publish timeout when stopping.
const WORKER_STOP_MARGIN: Duration = Duration::from_secs(5);

/// Phase 6: serves the three APIs until `RunningApp`'s shutdown token is cancelled, then runs
/// the [`StopSequence`].
pub(super) fn serve_until_stopped(
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
