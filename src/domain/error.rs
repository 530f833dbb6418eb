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
    /// The actor's role is below what the command needs.
    #[error("actor_id: needs the room's {needs} role")]
    Forbidden {
        /// The role it needs: `owner`, `admin` or `service`.
        needs: &'static str,
    },
    /// The actor holds the role the command needs, but a ban holds it out of the room: a banned
    /// user acts with no rank above member until the ban ends (docs/API.md).
    #[error(
        "actor_id: banned from the room until {until_ms} (ms since the epoch): a banned user holds no role in it"
    )]
    SuspendedByBan {
        /// When the ban ends.
        until_ms: i64,
    },
    /// A mute or ban in force is lifted (or cut short) only by a rank above its setter's, or by
    /// its setter on someone else; nobody lifts its own unless it outranks the setter.
    #[error(
        "actor_id: this {kind} was set by the room's {setter}: lifting it needs the room's {needs} role (a sanction is lifted only by a rank above its setter's, or by its setter on someone else)"
    )]
    LiftForbidden {
        /// `mute` or `ban`.
        kind: &'static str,
        /// The setter's rank now: `member`, `admin`, `owner` or `service`.
        setter: &'static str,
        /// The rank it needs: the one above the setter's.
        needs: &'static str,
    },
    /// The user is banned from the room.
    #[error("banned from the room until {until_ms} (ms since the epoch)")]
    Banned {
        /// When the ban ends.
        until_ms: i64,
    },
    /// The room has `rooms.max_admins` admins already.
    #[error("the room has its {max} admins already")]
    TooManyAdmins {
        /// The limit.
        max: usize,
    },
    /// An attribute is not at the version the write expected.
    #[error("attribute {key:?} is at version {version}")]
    AttributeConflict {
        /// The key.
        key: String,
        /// Its version now (0: absent).
        version: u64,
    },
    /// The room has no seats.
    #[error("the room has no seats")]
    SeatsDisabled,
    /// The seat is taken.
    #[error("seat {index} is taken")]
    SeatOccupied {
        /// The seat.
        index: u32,
    },
    /// Every seat is taken or locked.
    #[error("every seat is taken or locked")]
    SeatsFull,
    /// The user holds a seat already.
    #[error("{user_id} holds seat {index} already")]
    AlreadySeated {
        /// Who.
        user_id: String,
        /// Their seat.
        index: u32,
    },
    /// The seat is locked.
    #[error("seat {index} is locked")]
    SeatLocked {
        /// The seat.
        index: u32,
    },
    /// The user holds no seat.
    #[error("{user_id} holds no seat")]
    NotSeated {
        /// Who (or `seat <index>` for an empty seat).
        user_id: String,
    },
    /// The seat named is empty.
    #[error("seat {index} is empty")]
    SeatEmpty {
        /// The seat.
        index: u32,
    },
    /// No such pending request or invitation.
    #[error("{user_id} has no pending {kind}")]
    NoSuchRequest {
        /// Whose.
        user_id: String,
        /// `request` or `invite`.
        kind: &'static str,
    },
    /// The user has a pending request or invitation already.
    #[error("{user_id} has a pending {kind} already")]
    RequestPending {
        /// Whose.
        user_id: String,
        /// `request` or `invite`.
        kind: &'static str,
    },
    /// The room holds its most pending requests and invitations.
    #[error("the room has {max} pending seat requests and invitations already")]
    TooManyRequests {
        /// The limit.
        max: usize,
    },
    /// The action needs the other seat mode.
    #[error("seat_mode: the room's seats are in {} mode", mode.as_str())]
    WrongSeatMode {
        /// The room's mode now.
        mode: crate::domain::SeatMode,
    },
}
