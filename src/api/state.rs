//! The state every handler of both APIs is given ([`AppState`]), the service's
//! [`Lifecycle`] and this node's [`NodeInfo`].

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use super::{forward, read_limit, readiness, seat_limit};
use crate::room::RoomService;
use crate::store::SharedRepository;

/// Where the service is in its life: serving, leaving (readiness off, commands still served:
/// the load balancer moves traffic away), or draining (new commands refused).
#[derive(Debug, Clone, Default)]
pub struct Lifecycle {
    phase: Arc<AtomicU8>,
}

const SERVING: u8 = 0;
const LEAVING: u8 = 1;
const DRAINING: u8 = 2;

impl Lifecycle {
    /// Readiness turns 503; commands are still served (`http.shutdown_grace`).
    pub fn start_leaving(&self) {
        self.phase.fetch_max(LEAVING, Ordering::SeqCst);
    }

    /// `/readyz` and new commands answer 503.
    pub fn start_draining(&self) {
        self.phase.fetch_max(DRAINING, Ordering::SeqCst);
    }

    /// True while `/readyz` should answer 200.
    pub fn is_ready(&self) -> bool {
        self.phase.load(Ordering::SeqCst) == SERVING
    }

    /// True once new commands are refused.
    pub fn is_draining(&self) -> bool {
        self.phase.load(Ordering::SeqCst) >= DRAINING
    }
}

/// Everything the handlers need.
#[derive(Clone)]
pub struct AppState {
    /// The room service.
    pub rooms: RoomService,
    /// The repository (admin reads).
    pub repo: SharedRepository,
    /// Readiness's database check, shared by `/readyz` and gRPC health (one ping per 250 ms).
    pub db_ping: readiness::DbPing,
    /// Serving, leaving or draining.
    pub lifecycle: Lifecycle,
    /// Renders `/metrics`; `None` when no recorder is installed.
    pub metrics: Option<metrics_exporter_prometheus::PrometheusHandle>,
    /// Forwards requests for rooms owned elsewhere; `None` without a cluster.
    pub forwarder: Option<forward::Forwarder>,
    /// This node, as `GET /admin/rooms/{id}/owner` names it without a cluster.
    pub node: NodeInfo,
    /// Who a public request is from (`auth.*`).
    pub auth: crate::auth::Auth,
    /// Each reader's share of the events API (`rooms.history.reads_per_sec_per_client`);
    /// `None`: no limit.
    pub reads: Option<Arc<read_limit::ReadLimiter>>,
    /// Each user's share of the mic seat actions in a room
    /// (`rooms.seat_actions_per_user_per_sec`); `None`: no limit.
    pub seat_actions: Option<Arc<seat_limit::SeatLimiter>>,
    /// Members reads per reader and open rooms per owner (`rooms.members.*`,
    /// `rooms.max_open_per_owner`).
    pub bounds: super::bounds::Bounds,
}

/// This node's id and public URL.
#[derive(Debug, Clone, Default)]
pub struct NodeInfo {
    /// `node_id`.
    pub node_id: String,
    /// Its public API origin (`cluster.advertise_url`, or the bound public address).
    pub url: String,
}
