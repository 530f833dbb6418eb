//! [`CommandRequest`]: one room command as
//! [`RoomService::submit`](crate::room::RoomService::submit) takes it.

use std::sync::Arc;

use super::transport::Transport;
use crate::domain::{Command, CommandId, RoomId};
use crate::room::options::StillHolds;

/// One command for a room: what to apply, its idempotency key, the request it traces to, and
/// how it came in.
pub struct CommandRequest {
    pub(in crate::room) room_id: RoomId,
    pub(in crate::room) command_id: CommandId,
    pub(in crate::room) request_id: String,
    pub(in crate::room) command: Command,
    pub(in crate::room) transport: Transport,
    pub(in crate::room) still: Option<Arc<StillHolds>>,
    pub(in crate::room) caller: Option<String>,
}

impl CommandRequest {
    /// `command` for `room_id`, idempotent by `command_id`, traced as `request_id`; issued by
    /// the service itself and applied unconditionally until [`Self::via`] or [`Self::only_if`]
    /// say otherwise.
    pub fn new(
        room_id: RoomId,
        command_id: CommandId,
        request_id: impl Into<String>,
        command: Command,
    ) -> Self {
        let request_id = request_id.into();
        Self {
            room_id,
            command_id,
            request_id,
            command,
            transport: Transport::Internal,
            still: None,
            caller: None,
        }
    }

    /// The command came in over `transport` (the `transport` label of `room_commands_total`).
    #[must_use]
    pub fn via(mut self, transport: Transport) -> Self {
        self.transport = transport;
        self
    }

    /// The command was sent by `caller` (`user:alice`, `service:gateway`; `None`: anonymous,
    /// whose commands are the named user's, `user:<id>`): part of its identity, so another
    /// caller's command under the same `command_id` is another command, and a replay answers
    /// only its own caller (SPEC §13.1).
    #[must_use]
    pub fn by(mut self, caller: Option<String>) -> Self {
        self.caller = caller;
        self
    }

    /// Applies the command only if `still` holds for the room at the command's turn; otherwise
    /// nothing is applied or logged and the answer is `applied: false` (the presence worker
    /// re-checks that a member is still stale at the moment of removal).
    #[must_use]
    pub fn only_if(mut self, still: Arc<StillHolds>) -> Self {
        self.still = Some(still);
        self
    }
}

impl std::fmt::Debug for CommandRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CommandRequest")
            .field("room_id", &self.room_id)
            .field("command_id", &self.command_id)
            .field("request_id", &self.request_id)
            .field("command", &self.command)
            .field("transport", &self.transport)
            .field("conditional", &self.still.is_some())
            .field("caller", &self.caller)
            .finish()
    }
}
