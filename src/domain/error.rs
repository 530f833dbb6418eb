//! Why a command was refused by the domain.

/// A command the domain refuses; nothing changes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DomainError {
    /// A field is out of range.
    #[error("{field}: {reason}")]
    InvalidArgument {
        /// The field at fault.
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// The room does not exist.
    #[error("room not found")]
    RoomNotFound,
    /// CreateRoom for an id already taken.
    #[error("room already exists")]
    RoomExists,
    /// The room is closed.
    #[error("room is closed")]
    RoomClosed,
    /// The user is not a member of the room.
    #[error("{user_id} is not a member of the room")]
    NotMember {
        /// The user.
        user_id: String,
    },
    /// The room's heat would overflow.
    #[error("gift would overflow the room's heat")]
    HeatOverflow,
}
