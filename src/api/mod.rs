//! The room API apart from its transports: what the HTTP API (`src/http`, axum) and the gRPC
//! API (`src/grpc`, tonic) both serve from, so that neither imports the other; nor does this
//! module import either.
//!
//! - the application state every handler of both APIs is given ([`AppState`]), with the
//!   service's [`Lifecycle`] and this node's [`NodeInfo`];
//! - the neutral request both edges build ([`operation`]: a [`RoomRequest`] is an
//!   [`Operation`] on a room and its [`Sender`]: caller, credential, request id, edge,
//!   deadline), and the [`Outcome`] each edge writes back in its own format;
//! - where a request runs ([`dispatch`]): [`serve`] runs it here, or carries it once to the
//!   room's owner ([`forward`]: the operation itself, as one JSON body on an internal route),
//!   whose end of the hop ([`serve_hop`]) runs it through the same [`serve`];
//! - the operations behind it ([`rooms`]): run a command, a presence heartbeat or a batch of
//!   them, a page of members or of events; and the limits both edges apply
//!   ([`rooms::DEFAULT_MEMBERS_LIMIT`], [`rooms::MAX_MEMBERS_LIMIT`],
//!   [`rooms::MAX_HEARTBEAT_IDS`], [`BATCH_HEARTBEAT_BYTES`]);
//! - the error they answer with ([`ApiError`]: a status, a stable snake_case code and a
//!   message), one classification of every failure for both APIs. HTTP renders it as its
//!   status and a JSON body (`http::error`), gRPC as a standard status code (`grpc::status`);
//! - readiness's database ping, shared by `/readyz` and gRPC health ([`readiness`]);
//! - the rules both edges apply to a request id, and the report of a caught panic ([`edge`]).
//!
//! Nothing here knows a public route, a method or a wire format of its own (the hop's, in
//! [`forward::wire`], excepted); the transports parse their requests into a [`RoomRequest`],
//! call [`serve`], and map the [`Outcome`] back.

pub mod dispatch;
pub mod edge;
pub mod error;
pub mod forward;
pub mod operation;
pub mod read_limit;
pub mod readiness;
pub mod rooms;

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use crate::room::RoomService;
use crate::store::SharedRepository;
pub use dispatch::{serve, serve_hop};
pub use error::ApiError;
pub use operation::{Credential, Operation, Outcome, RoomRequest, Sender};

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
}

/// This node's id and public URL.
#[derive(Debug, Clone, Default)]
pub struct NodeInfo {
    /// `node_id`.
    pub node_id: String,
    /// Its public API origin (`cluster.advertise_url`, or the bound public address).
    pub url: String,
}

/// Largest body the batch heartbeat route takes whatever `http.body_limit_bytes` says: its
/// largest valid request, 1000 user ids of 64 bytes (about 67 KB of JSON), fits. gRPC's limit
/// (one for every method) and a forwarded hop's are at least this too.
pub const BATCH_HEARTBEAT_BYTES: usize = 72 * 1024;
