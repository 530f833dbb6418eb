//! `apply(state, command)`: the pure heart of the domain.

use serde_json::json;

use super::command::{Actor, CloseReason, Command, CommandContext, LeaveReason};
use super::error::DomainError;
use super::event::{Event, EventType};
use super::ids::{GiftId, UserId};
use super::seat::{PendingSeat, SeatConfig};
use super::state::{
    Attribute, LiveFigures, Member, Restriction, RestrictionKind, RoomState, RoomStatus, SenderTotal,
};

pub mod attributes;
mod cover;
pub mod moderation;
mod rank;
pub mod seats;

/// What a command changed beyond the small snapshot: the rows the storage writes for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// A member joined.
    MemberJoined {
        /// Who.
        user_id: UserId,
        /// When.
        joined_at_ms: i64,
    },
    /// A member left.
    MemberLeft {
        /// Who.
        user_id: UserId,
    },
    /// Every member was removed (the room closed).
    MembersCleared,
    /// A sender's gift total is now this.
    SenderTotal {
        /// The sender.
        user_id: UserId,
        /// Their running total.
        total: SenderTotal,
    },
    /// A user was muted or banned (or its mute or ban changed).
    Restricted {
        /// Mute or ban.
        kind: RestrictionKind,
        /// Who.
        user_id: UserId,
        /// Until when, why, by whom.
        restriction: Restriction,
    },
    /// A user's mute or ban was lifted.
    Lifted {
        /// Mute or ban.
        kind: RestrictionKind,
        /// Who.
        user_id: UserId,
    },
    /// An attribute was set (its row, like a member's: never in the snapshot).
    AttributeSet {
        /// The key.
        key: String,
        /// Its value and version.
        attribute: Attribute,
    },
    /// An attribute was deleted.
    AttributeDeleted {
        /// The key.
        key: String,
    },
    /// A seat request or invitation is pending (its row).
    SeatPendingSet {
        /// Whose.
        user_id: UserId,
        /// What.
        pending: PendingSeat,
    },
    /// A user's pending request or invitation is gone (answered, withdrawn, expired, dropped).
    SeatPendingDropped {
        /// Whose.
        user_id: UserId,
    },
}

/// What a [`Change`] does to the room's members, for whoever keeps them beside the state (the
/// commit's member rows, the cell's presence): said once here, so a new kind of change is
/// weighed in one place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberChange<'a> {
    /// A member joined, at this time.
    Joined(&'a UserId, i64),
    /// A member left.
    Left(&'a UserId),
    /// Every member was removed.
    Cleared,
}

impl Change {
    /// The change to the members this is, if any.
    pub fn member(&self) -> Option<MemberChange<'_>> {
        match self {
            Change::MemberJoined { user_id, joined_at_ms } => {
                Some(MemberChange::Joined(user_id, *joined_at_ms))
            }
            Change::MemberLeft { user_id } => Some(MemberChange::Left(user_id)),
            Change::MembersCleared => Some(MemberChange::Cleared),
            Change::SenderTotal { .. }
            | Change::Restricted { .. }
            | Change::Lifted { .. }
            | Change::AttributeSet { .. }
            | Change::AttributeDeleted { .. }
            | Change::SeatPendingSet { .. }
            | Change::SeatPendingDropped { .. } => None,
        }
    }
}

/// Maximum gift count per command.
pub const MAX_GIFT_COUNT: u32 = 9_999;
/// Maximum value of one gift unit.
pub const MAX_UNIT_VALUE: u32 = 1_000_000;
/// Maximum title length in characters.
pub const MAX_TITLE_CHARS: usize = 128;

/// The result of applying a command.
#[derive(Debug, Clone, PartialEq)]
pub struct Applied {
    /// The state after the command (equal to the input when `applied` is false).
    pub state: RoomState,
    /// Events, in order; empty when `applied` is false.
    pub events: Vec<Event>,
    /// Member and gift-total changes, in order; empty when `applied` is false.
    pub changes: Vec<Change>,
    /// False when the command was a no-op (join of a member, leave of a non-member).
    pub applied: bool,
}

impl Applied {
    fn noop(state: &RoomState) -> Self {
        Applied { state: state.clone(), events: Vec::new(), changes: Vec::new(), applied: false }
    }
}

/// Applies `command` to `state` (`None`: the room does not exist) and returns the new state
/// and its events, or why the command is refused. Pure: no clock, no I/O.
pub fn apply(
    state: Option<&RoomState>,
    command: &Command,
    ctx: &CommandContext,
) -> Result<Applied, DomainError> {
    let state = match (state, command) {
        (None, Command::CreateRoom { owner_id, title, seats }) => {
            return create(owner_id, title, *seats, ctx);
        }
        (None, _) => return Err(DomainError::RoomNotFound),
        (Some(state), _) => state,
    };
    if let Command::CloseRoom { by: Some(actor), idle: false } = command {
        // Who may close comes first: a stranger is refused a closed room's close as an open
        // one's, whatever it says of the room.
        state.require(actor, moderation::Role::Owner, ctx.now_ms)?;
    }
    if state.status == RoomStatus::Closed {
        return Err(DomainError::RoomClosed);
    }
    let now = ctx.now_ms;
    let mut draft = Draft::of(state, now);
    let events = match command {
        Command::CreateRoom { .. } => return Err(DomainError::RoomExists),
        Command::JoinRoom { user_id } => draft.join(user_id, now)?,
        Command::LeaveRoom { user_id, reason } => draft.leave(user_id, *reason),
        Command::SendGift { sender_id, receiver_id, gift_id, count, unit_value } => {
            Some(draft.send_gift(sender_id, receiver_id, gift_id, *count, *unit_value)?)
        }
        Command::CloseRoom { by, idle } => {
            draft.close(by.as_ref(), idle.then_some(ctx.idle_close_after_ms), now)?
        }
        Command::SetAdmin { by, user_id, admin } => draft.set_admin(by, user_id, *admin, ctx.max_admins)?,
        Command::MuteUser { by, user_id, duration_s } => draft.mute(by, user_id, *duration_s, now)?,
        Command::KickUser { by, user_id, ban_s, reason } => {
            Some(draft.kick(by, user_id, *ban_s, reason, now)?)
        }
        Command::UnbanUser { by, user_id } => draft.unban(by, user_id, now)?,
        Command::MuteAll { by, muted } => draft.mute_all(by, *muted)?,
        Command::UpdateRoomInfo { by, info } => draft.update_info(by, info)?,
        Command::SetAttributes { by, write } => draft.set_attributes(by, write)?,
        Command::Seat { by, action } => draft.seat(by, action, ctx)?,
        Command::ExpireSeatRequest { user_id, kind, expires_at_ms } => {
            draft.expire_pending(user_id, *kind, *expires_at_ms, now)?
        }
    };
    Ok(match events {
        Some(events) => {
            draft.state.figures.last_command_ms = now;
            Applied { state: draft.state, events, changes: draft.changes, applied: true }
        }
        None => Applied::noop(state),
    })
}

/// An open room as one command changes it at the command's clock: its next state (one version
/// on) and the rows the command changes. Each command's step answers its events, or `None` for a
/// no-op (the draft is then dropped).
struct Draft {
    state: RoomState,
    changes: Vec<Change>,
    /// The command's clock: the ranks are weighed at it (a ban in force suspends a role).
    now_ms: i64,
}

impl Draft {
    fn of(state: &RoomState, now_ms: i64) -> Self {
        // O(1): members and senders are persistent maps.
        let mut next = state.clone();
        next.version += 1;
        Self { state: next, changes: Vec::with_capacity(1), now_ms }
    }

    /// [`RoomState::require`] at the command's clock.
    fn require(&self, actor: &Actor, needs: moderation::Role) -> Result<moderation::Role, DomainError> {
        self.state.require(actor, needs, self.now_ms)
    }

    /// [`RoomState::may_moderate`] at the command's clock.
    fn may_moderate(&self, actor: &Actor, target: &UserId) -> Result<(), DomainError> {
        self.state.may_moderate(actor, target, self.now_ms)
    }

    /// A member joins; `None` when `user_id` is one already; refused while they are banned.
    fn join(&mut self, user_id: &UserId, now_ms: i64) -> Result<Option<Vec<Event>>, DomainError> {
        let next = &mut self.state;
        if next.members.contains_key(user_id) {
            return Ok(None);
        }
        if let Some(ban) = next.ban_of(user_id, now_ms) {
            return Err(DomainError::Banned { until_ms: ban.until_ms });
        }
        next.members.insert(user_id.clone(), Member { joined_at_ms: now_ms });
        next.figures.peak_members = next.figures.peak_members.max(next.members.len() as u64);
        self.changes.push(Change::MemberJoined { user_id: user_id.clone(), joined_at_ms: now_ms });
        Ok(Some(vec![event(
            EventType::RoomUserJoined,
            json!({"user_id": user_id, "joined_at_ms": now_ms, "member_count": next.members.len()}),
        )]))
    }

    /// A member leaves, and its seat; `None` when `user_id` is none.
    fn leave(&mut self, user_id: &UserId, reason: LeaveReason) -> Option<Vec<Event>> {
        self.state.members.remove(user_id)?;
        self.changes.push(Change::MemberLeft { user_id: user_id.clone() });
        let mut payload =
            json!({"user_id": user_id, "reason": reason, "member_count": self.state.members.len()});
        with_seats(&mut payload, self.unseat(user_id));
        Some(vec![event(EventType::RoomUserLeft, payload)])
    }

    /// A member sends a gift: the heat and the sender's total grow, and the rank is redrawn
    /// (an event of its own when its order changed).
    fn send_gift(
        &mut self,
        sender_id: &UserId,
        receiver_id: &UserId,
        gift_id: &GiftId,
        count: u32,
        unit_value: u32,
    ) -> Result<Vec<Event>, DomainError> {
        check_range("count", count, MAX_GIFT_COUNT)?;
        check_range("unit_value", unit_value, MAX_UNIT_VALUE)?;
        let next = &mut self.state;
        if !next.members.contains_key(sender_id) {
            return Err(DomainError::NotMember { user_id: sender_id.to_string() });
        }
        let value = u64::from(count) * u64::from(unit_value);
        let total = add_gift(next, sender_id, value)?;
        next.figures.gifts += 1;
        self.changes.push(Change::SenderTotal { user_id: sender_id.clone(), total });
        let mut events = vec![
            event(
                EventType::RoomGiftSent,
                json!({
                    "sender_id": sender_id, "receiver_id": receiver_id, "gift_id": gift_id,
                    "count": count, "unit_value": unit_value, "total_value": value,
                }),
            ),
            event(EventType::RoomHeatChanged, json!({"heat": next.heat, "delta": value})),
        ];
        // The rank before the gift is the room's as it was: nothing above touched it.
        let rank = next.rank_after_gift(sender_id);
        let order_changed = !rank.iter().map(|e| &e.user_id).eq(next.gift_rank.iter().map(|e| &e.user_id));
        next.gift_rank = rank;
        if order_changed {
            events.push(event(EventType::RoomRankChanged, json!({"gift_rank": next.gift_rank})));
        }
        Ok(events)
    }

    /// Closes the room: an owner's or a service's close, or (`idle`: `Some` of
    /// `rooms.idle_close_after`) the service's idle close, which applies only to a room that
    /// has had no member and no command for that long (never while idle close is off).
    fn close(
        &mut self,
        by: Option<&Actor>,
        idle: Option<Option<i64>>,
        now_ms: i64,
    ) -> Result<Option<Vec<Event>>, DomainError> {
        let next = &mut self.state;
        let reason = match (idle, by) {
            (Some(after), _) => {
                let quiet =
                    after.is_some_and(|after| next.figures.last_command_ms <= now_ms.saturating_sub(after));
                if !next.members.is_empty() || !quiet {
                    return Ok(None);
                }
                CloseReason::Idle
            }
            (None, Some(Actor::Service(_))) => CloseReason::Admin,
            (None, Some(actor)) => {
                next.require(actor, moderation::Role::Owner, now_ms)?;
                CloseReason::Owner
            }
            (None, None) => CloseReason::Owner,
        };
        let removed = next.members.len();
        next.members = Default::default();
        next.status = RoomStatus::Closed;
        self.changes.push(Change::MembersCleared);
        self.clear_seats();
        let next = &self.state;
        let LiveFigures { created_at_ms, peak_members, gifts, .. } = next.figures;
        let summary = json!({
            "duration_ms": now_ms.saturating_sub(created_at_ms).max(0),
            "peak_members": peak_members,
            "gifts": gifts,
            "gift_value": next.heat,
            "unique_senders": next.senders.len(),
        });
        Ok(Some(vec![event(
            EventType::RoomClosed,
            json!({"members_removed": removed, "reason": reason, "by": by, "summary": summary}),
        )]))
    }
}

/// A title of 1–`max` characters without control characters.
fn check_title(title: &str, max: usize) -> Result<(), DomainError> {
    let chars = title.chars().count();
    if chars == 0 || chars > max || title.chars().any(char::is_control) {
        return Err(DomainError::InvalidArgument {
            field: "title",
            reason: format!("must be 1–{max} characters without control characters"),
        });
    }
    Ok(())
}

fn create(
    owner_id: &UserId,
    title: &str,
    seats: SeatConfig,
    ctx: &CommandContext,
) -> Result<Applied, DomainError> {
    check_title(title, MAX_TITLE_CHARS)?;
    let seat_list = seats::new_seats(seats)?;
    let state = RoomState {
        room_id: ctx.room_id.clone(),
        owner_id: owner_id.clone(),
        title: title.to_owned(),
        status: RoomStatus::Open,
        members: Default::default(),
        heat: 0,
        senders: Default::default(),
        gift_rank: Vec::new(),
        version: 1,
        admins: Default::default(),
        muted_all: false,
        announcement: String::new(),
        cover_url: String::new(),
        attributes: Default::default(),
        mutes: Default::default(),
        bans: Default::default(),
        figures: LiveFigures {
            created_at_ms: ctx.now_ms,
            last_command_ms: ctx.now_ms,
            ..LiveFigures::default()
        },
        seat_mode: seats.mode,
        seats: seat_list,
        seat_pending: Default::default(),
    };
    let events = vec![event(EventType::RoomCreated, json!({"owner_id": owner_id, "title": title}))];
    Ok(Applied { state, events, changes: Vec::new(), applied: true })
}

/// Adds `value` to the heat and the sender's total; returns the new total.
fn add_gift(next: &mut RoomState, sender_id: &UserId, value: u64) -> Result<SenderTotal, DomainError> {
    let delta = i64::try_from(value).map_err(|_| DomainError::HeatOverflow)?;
    next.heat = next.heat.checked_add(delta).ok_or(DomainError::HeatOverflow)?;
    let version = next.version;
    let total = next
        .senders
        .entry(sender_id.clone())
        .or_insert(SenderTotal { total_value: 0, first_version: version });
    total.total_value = total.total_value.checked_add(value).ok_or(DomainError::HeatOverflow)?;
    Ok(*total)
}

fn check_range(field: &'static str, value: u32, max: u32) -> Result<(), DomainError> {
    if (1..=max).contains(&value) {
        Ok(())
    } else {
        Err(DomainError::InvalidArgument { field, reason: format!("must be between 1 and {max}") })
    }
}

/// Adds the room's seats to a departure's payload when the member held one.
fn with_seats(payload: &mut serde_json::Value, seats: Option<serde_json::Value>) {
    if let (Some(seats), Some(map)) = (seats, payload.as_object_mut()) {
        map.insert("seats".to_owned(), seats);
    }
}

fn event(event_type: EventType, payload: serde_json::Value) -> Event {
    Event { event_type, payload }
}

#[cfg(test)]
mod tests;
