//! The pure room domain: identifiers, room state, commands, events and the `apply` function.
//!
//! Nothing here does I/O or knows about storage, HTTP or IM; `apply(state, command)` is a pure,
//! synchronous function tested without a runtime. The room cells (`crate::room`) call it and
//! make its result durable.

mod apply;
mod command;
mod error;
mod event;
mod ids;
#[cfg(test)]
mod proptests;
mod seat;
mod state;

pub use apply::attributes::{MAX_ATTRIBUTE_VALUE_BYTES, MAX_ATTRIBUTES};
pub use apply::moderation::{DEFAULT_BAN_S, DEFAULT_MAX_ADMINS, MAX_RESTRICTION_S, Role};
pub use apply::{Applied, Change, MAX_GIFT_COUNT, MAX_UNIT_VALUE, MemberChange, apply};
pub use command::{
    Acting, Actor, AttributeWrite, CloseReason, Command, CommandContext, InfoChange, LeaveReason,
};
pub use error::DomainError;
pub use event::{ENVELOPE_ID_HEX, Event, EventEnvelope, EventType, LARGEST_IM_EVENT_BYTES, envelope_id};
pub use ids::{CommandId, GiftId, IdError, RESERVED_COMMAND_PREFIX, RequestId, RoomId, UserId};
pub use seat::{
    DEFAULT_SEAT_REQUEST_TTL_MS, MAX_PENDING_SEATS, MAX_SEATS, MovePolicy, PendingKind, PendingSeat, Seat,
    SeatAction, SeatConfig, SeatMode,
};
pub use state::{
    Attribute, GIFT_RANK_SIZE, LiveFigures, Member, MemberView, RankEntry, Restriction, RestrictionKind,
    RoomSnapshot, RoomState, RoomStatus, SenderTotal, StoredRestriction,
};
