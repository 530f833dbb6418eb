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
//! - what one caller may cost the others ([`bounds`]: members reads per reader, open rooms per
//!   owner);
//! - readiness's database ping, shared by `/readyz` and gRPC health ([`readiness`]);
//! - the rules both edges apply to a request id, and the report of a caught panic ([`edge`]).
//!
//! Nothing here knows a public route, a method or a wire format of its own (the hop's, in
//! [`forward::wire`], excepted); the transports parse their requests into a [`RoomRequest`],
//! call [`serve`], and map the [`Outcome`] back.

pub mod bounds;
pub mod dispatch;
pub mod edge;
pub mod error;
pub mod forward;
pub mod operation;
pub mod read_limit;
pub mod readiness;
pub mod rooms;
pub mod seat_limit;
pub mod seats;
mod state;

pub use dispatch::{serve, serve_hop};
pub use error::ApiError;
pub use operation::{BATCH_HEARTBEAT_BYTES, Credential, Operation, Outcome, RoomRequest, Sender};
pub use state::{AppState, Lifecycle, NodeInfo};
