//! The start's phases 2 to 4 ([`super::start_with_redis`]): the [`Core`] every later phase
//! builds on (the room service over the store and the publish stack, this node's ownership),
//! the three [`Listeners`], bound before anything is served, and the [`Apis`]: the public,
//! admin and gRPC routers over one state.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use tokio::net::TcpListener;
use tokio::sync::Notify;

use super::{auth, pack_limits, wallet};
use crate::api::bounds::Bounds;
use crate::api::forward::{Forwarder, Seal, hop_limit};
use crate::api::read_limit::{ReadApi, ReadLimiter};
use crate::api::readiness::DbPing;
use crate::api::seat_limit::SeatLimiter;
use crate::api::{AppState, Lifecycle, NodeInfo};
use crate::cluster::{LeaseKeeper, Ownership};
use crate::config::Settings;
use crate::delivery::{Quarantine, SharedPermits};
use crate::grpc::{self, GrpcOptions};
use crate::http::{self, PublicOptions};
use crate::publish::Publisher;
use crate::publish::tencent::wire::MAX_GROUP_ID_BYTES;
use crate::room::{RoomOptions, RoomService, system_clock};
use crate::store::SharedRepository;

/// Phase 2 (after joining the cluster, when it is on): what every later phase builds on.
pub(super) struct Core {
    pub(super) repo: SharedRepository,
    /// This node's shard leases, in a cluster.
    pub(super) keeper: Option<LeaseKeeper>,
    /// Which rooms this node serves.
    pub(super) ownership: Ownership,
    pub(super) rooms: RoomService,
    pub(super) publisher: Publisher,
    /// The command path wakes the outbox worker with it when it leaves events pending.
    pub(super) worker_wake: Arc<Notify>,
    /// The senders whose events go alone (SPEC §13.1), shared by the lanes and the worker.
    pub(super) quarantine: Arc<Quarantine>,
    /// Tencent's rate limits, shared by the lanes and the worker.
    pub(super) permits: SharedPermits,
}

impl Core {
    /// The room service over `repo`, publishing through `publisher`, serving the rooms
    /// `keeper`'s leases give this node (every room without a cluster).
    pub(super) fn build(
        settings: &Settings,
        repo: SharedRepository,
        publisher: Publisher,
        permits: SharedPermits,
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
            permits: permits.clone(),
            max_admins: settings.rooms.max_admins,
            seat_request_ttl: settings.rooms.seat_request_ttl,
            idle_close_after: settings.rooms.idle_close_after,
            groups: groups(settings),
        };
        let rooms = RoomService::new(repo.clone(), publisher.clone(), room_options, system_clock());
        Ok(Self { repo, keeper, ownership, rooms, publisher, worker_wake, quarantine, permits })
    }
}

/// The IM group operations the rooms' events carry: with IM on, `tencent_im.manage_groups`
/// and `.avchatroom_ban`; none with IM off.
pub(super) fn groups(settings: &Settings) -> crate::delivery::groups::Groups {
    settings.tencent_im.as_ref().map_or(crate::delivery::groups::Groups::NONE, |im| {
        crate::delivery::groups::Groups {
            manage: im.manage_groups,
            ban: im.manage_groups && im.avchatroom_ban,
        }
    })
}

/// Phase 3: the three listeners, bound (a port in use fails the start here, naming its key).
pub(super) struct Listeners {
    pub(super) public: TcpListener,
    pub(super) admin: TcpListener,
    pub(super) grpc: TcpListener,
    pub(super) addr: SocketAddr,
    pub(super) admin_addr: SocketAddr,
    pub(super) grpc_addr: SocketAddr,
}

impl Listeners {
    pub(super) async fn bind(settings: &Settings) -> anyhow::Result<Self> {
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
pub(super) struct Apis {
    pub(super) public: axum::Router,
    pub(super) admin: axum::Router,
    pub(super) grpc: axum::Router,
    pub(super) lifecycle: Lifecycle,
}

impl Apis {
    pub(super) async fn build(
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
                let seal = Seal::new(&settings.cluster.hop_secrets);
                Forwarder::new(k.cluster(), http_settings.request_timeout, body_limit, seal)
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
            reads: ReadLimiter::new(ReadApi::Events, settings.rooms.history.reads_per_sec_per_client)
                .map(Arc::new),
            bounds: Bounds::new(&settings.rooms),
            seat_actions: SeatLimiter::new(settings.rooms.seat_actions_per_user_per_sec).map(Arc::new),
            node: NodeInfo { node_id: settings.node_id.clone(), url },
        };
        let public = http::public_router(state.clone(), PublicOptions::from(http_settings));
        let grpc = grpc::router(state.clone(), GrpcOptions::from(http_settings)).context("gRPC services")?;
        let admin = http::admin_router(state, http_settings.admin_token.clone());
        Ok(Self { public, admin, grpc, lifecycle })
    }
}
