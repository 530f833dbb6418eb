//! Where a room request runs: here when this node owns the room (or there is no cluster),
//! else at the owner, carried there once by the [`Forwarder`](super::forward::Forwarder). The
//! owner's end of the hop runs it through the same [`serve`], so a request answers the same
//! whichever node and edge it reached.

use super::error::ApiError;
use super::forward::wire::Hop;
use super::operation::{Credential, Operation, Outcome, RoomRequest};
use super::rooms::{members_page, moderation_page, run_command, run_heartbeat, run_heartbeats, seats_view};
use super::state::AppState;
use crate::auth::{Auth, Caller};

/// Serves `request` here, or at its room's owner; a request that came over a hop for a room
/// this node does not own (the sender's directory was stale) answers 503 `not_owner`: never a
/// second hop.
pub async fn serve(state: &AppState, request: RoomRequest) -> Result<Outcome, ApiError> {
    let elsewhere = state.forwarder.as_ref().filter(|f| !f.cluster().owns(request.room_id.as_str()));
    match elsewhere {
        Some(_) if request.sender.hop => Err(ApiError::not_owner()),
        Some(forwarder) => forwarder.forward(&request).await,
        None => execute(state, request).await,
    }
}

/// The owner's end of a hop: `hop` from the caller of `credential`, verified here again (the
/// forwarding node's word is not taken: SPEC §12.3), traced as `request_id`, and given up at
/// the caller's deadline (503 `request_timeout`; a command already queued still commits).
pub async fn serve_hop(
    state: &AppState,
    hop: Hop,
    credential: Option<Credential>,
    request_id: String,
) -> Result<Outcome, ApiError> {
    let read = hop.operation.is_read();
    let caller = verify_caller(&state.auth, credential.as_ref().map(Credential::as_bytes), read).await?;
    let request = hop.into_request(caller, credential, request_id);
    match request.sender.deadline {
        Some(deadline) => tokio::time::timeout_at(deadline, serve(state, request))
            .await
            .unwrap_or_else(|_| Err(ApiError::request_timeout())),
        None => serve(state, request).await,
    }
}

/// The caller of a request with `credential` (an `Authorization` value): anonymous for a
/// `read` while reads are public, else the caller the credential names. A refusal is counted.
pub async fn verify_caller(auth: &Auth, credential: Option<&[u8]>, read: bool) -> Result<Caller, ApiError> {
    if read && auth.public_reads() {
        return Ok(Caller::Anonymous);
    }
    auth.authenticate(credential).await.map_err(|refused| refused.counted().into())
}

/// Runs `request` here: the one place an operation meets the room service's API, for both
/// edges and for hops.
async fn execute(state: &AppState, request: RoomRequest) -> Result<Outcome, ApiError> {
    request.operation.check()?;
    let RoomRequest { room_id, operation, sender } = request;
    let caller = &sender.caller;
    match operation {
        Operation::Command { command_id, command } => {
            let (transport, request_id) = (sender.transport, sender.request_id);
            run_command(state, transport, caller, room_id, command_id, request_id, command)
                .await
                .map(Outcome::Command)
        }
        Operation::Heartbeat { user_id } => {
            run_heartbeat(state, caller, &room_id, &user_id).await.map(|()| Outcome::Heartbeat)
        }
        Operation::Heartbeats { user_ids } => {
            run_heartbeats(state, caller, &room_id, &user_ids).await.map(Outcome::Heartbeats)
        }
        Operation::Snapshot => Ok(Outcome::Snapshot(state.rooms.snapshot(&room_id).await?)),
        Operation::Members { after, limit } => {
            members_page(state, &room_id, after.as_ref(), limit).await.map(Outcome::Members)
        }
        Operation::Moderation { kind, after, limit } => {
            moderation_page(state, caller, &room_id, kind, after.as_ref(), limit)
                .await
                .map(Outcome::Moderation)
        }
        Operation::Seats => seats_view(state, caller, &room_id).await.map(Outcome::Seats),
    }
}
