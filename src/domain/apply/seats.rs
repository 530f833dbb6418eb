//! The mic seat commands (SPEC §14.3): who takes, leaves, requests, is invited to, is kicked
//! from and moves between a room's seats, with the roles of [`super::moderation`]. A seat is
//! only ever held by a member, and nobody holds two: every step below keeps both, and a member
//! leaving the room (its own leave, a stale eviction, a kick) leaves its seat and drops its
//! pending request in the same command ([`Draft::unseat`]); the close empties them all
//! ([`Draft::clear_seats`]).
//!
//! Each command makes exactly one event: `RoomSeatsChanged` (the whole list and its cause) when
//! seats changed, else the request's or invitation's own event.

use serde_json::{Value, json};

use super::moderation::Role;
use super::{Change, Draft, event};
use crate::domain::command::{Actor, CommandContext};
use crate::domain::error::DomainError;
use crate::domain::event::{Event, EventType};
use crate::domain::ids::UserId;
use crate::domain::seat::{
    MAX_PENDING_SEATS, MAX_SEATS, MovePolicy, PendingKind, PendingSeat, Seat, SeatAction, SeatConfig,
    SeatMode,
};
use crate::domain::state::RoomState;

type Step = Result<Option<Vec<Event>>, DomainError>;

/// The seats of a room created with `config`, all free.
pub(super) fn new_seats(config: SeatConfig) -> Result<imbl::Vector<Seat>, DomainError> {
    if config.count > MAX_SEATS {
        return Err(DomainError::InvalidArgument {
            field: "seats.count",
            reason: format!("must be 0–{MAX_SEATS}"),
        });
    }
    if config.count == 0 && config.mode != SeatMode::Free {
        return Err(DomainError::InvalidArgument {
            field: "seats.mode",
            reason: "a room without seats has no seat mode (give seats.count)".into(),
        });
    }
    Ok((0..config.count).map(|index| Seat { index, user_id: None, locked: false, muted: false }).collect())
}

impl RoomState {
    /// The seat `user` holds, if any (its position in the list, which is its index).
    pub fn seat_of(&self, user: &UserId) -> Option<u32> {
        self.seats.iter().position(|s| s.user_id.as_ref() == Some(user)).map(|at| at as u32)
    }

    /// `index` as a position in the seat list: 409 without seats, 400 out of range.
    fn seat_at(&self, index: u32) -> Result<usize, DomainError> {
        self.seats_enabled()?;
        if index < self.seats.len() as u32 {
            Ok(index as usize)
        } else {
            Err(DomainError::InvalidArgument {
                field: "index",
                reason: format!(
                    "must be 0–{} (the room has {} seats)",
                    self.seats.len() - 1,
                    self.seats.len()
                ),
            })
        }
    }

    fn seats_enabled(&self) -> Result<(), DomainError> {
        if self.seats.is_empty() { Err(DomainError::SeatsDisabled) } else { Ok(()) }
    }

    /// The seat a user is seated on: `index` if it is free, else the lowest free one.
    fn free_seat(&self, index: Option<u32>) -> Result<usize, DomainError> {
        match index {
            Some(index) => {
                let at = self.seat_at(index)?;
                let seat = &self.seats[at];
                if seat.locked {
                    Err(DomainError::SeatLocked { index })
                } else if seat.user_id.is_some() {
                    Err(DomainError::SeatOccupied { index })
                } else {
                    Ok(at)
                }
            }
            None => {
                self.seats_enabled()?;
                let free = self.seats.iter().position(|s| s.user_id.is_none() && !s.locked);
                free.ok_or(DomainError::SeatsFull)
            }
        }
    }

    /// Refuses `actor` kicking, locking or muting `holder`'s seat unless it is an admin at least
    /// and may moderate them, or it is its own seat (the owner's too).
    fn may_act_on_seat_of(&self, actor: &Actor, holder: &UserId, now_ms: i64) -> Result<(), DomainError> {
        self.require(actor, Role::Admin, now_ms)?;
        if matches!(actor, Actor::User(me) if me == holder) {
            Ok(())
        } else {
            self.may_moderate(actor, holder, now_ms)
        }
    }

    /// The user as a member, not seated: who may be given a seat.
    fn seatable(&self, user: &UserId) -> Result<(), DomainError> {
        if !self.members.contains_key(user) {
            return Err(DomainError::NotMember { user_id: user.to_string() });
        }
        match self.seat_of(user) {
            Some(index) => Err(DomainError::AlreadySeated { user_id: user.to_string(), index }),
            None => Ok(()),
        }
    }
}

/// The user a member's own seat action is by: a service holds no seat.
fn own(by: &Actor) -> Result<&UserId, DomainError> {
    match by {
        Actor::User(user) => Ok(user),
        Actor::Service(_) => Err(DomainError::InvalidArgument {
            field: "actor_id",
            reason: "a service holds no seat: name the user it acts for".into(),
        }),
    }
}

impl Draft {
    /// Applies one seat action.
    pub(super) fn seat(&mut self, by: &Actor, action: &SeatAction, ctx: &CommandContext) -> Step {
        self.state.seats_enabled()?;
        let ttl = ctx.seat_request_ttl_ms;
        match action {
            SeatAction::Take { index } => self.take(by, *index),
            SeatAction::Leave => {
                let user = own(by)?;
                let index = self.state.seat_of(user).ok_or_else(|| not_seated(user))?;
                self.state.seats[index as usize].user_id = None;
                Ok(Some(self.seats_changed("leave", Some(user), index, by, json!({}))))
            }
            SeatAction::Request { index } => self.request(by, *index, ctx.now_ms.saturating_add(ttl)),
            SeatAction::CancelRequest { user_id } => self.cancel(by, user_id.as_ref()),
            SeatAction::AnswerRequest { user_id, accept } => {
                // Accepting seats anyone; turning down is acting on the requester.
                if *accept {
                    self.require(by, Role::Admin)?;
                } else {
                    self.may_moderate(by, user_id)?;
                }
                self.answer(by, user_id, PendingKind::Request, *accept, ctx.now_ms)
            }
            SeatAction::Invite { user_id, index } => {
                self.invite(by, user_id, *index, ctx.now_ms.saturating_add(ttl))
            }
            SeatAction::AnswerInvite { accept } => {
                let user = own(by)?.clone();
                self.answer(by, &user, PendingKind::Invite, *accept, ctx.now_ms)
            }
            SeatAction::Kick { index } => {
                self.require(by, Role::Admin)?;
                let at = self.state.seat_at(*index)?;
                let holder =
                    self.state.seats[at].user_id.clone().ok_or(DomainError::SeatEmpty { index: *index })?;
                self.state.may_act_on_seat_of(by, &holder, self.now_ms)?;
                self.state.seats[at].user_id = None;
                Ok(Some(self.seats_changed("kick", Some(&holder), *index, by, json!({}))))
            }
            SeatAction::Lock { index, locked } => self.lock(by, *index, *locked),
            SeatAction::Mute { index, muted } => {
                self.require(by, Role::Admin)?;
                let at = self.state.seat_at(*index)?;
                let holder = self.state.seats[at].user_id.clone();
                if let Some(holder) = &holder {
                    self.state.may_act_on_seat_of(by, holder, self.now_ms)?;
                }
                if self.state.seats[at].muted == *muted {
                    return Ok(None);
                }
                self.state.seats[at].muted = *muted;
                Ok(Some(self.seats_changed("mute", holder.as_ref(), *index, by, json!({"muted": muted}))))
            }
            SeatAction::Move { user_id, to, policy } => self.move_seat(by, user_id, *to, *policy),
        }
    }

    /// A member takes a seat: in free mode, or as the owner or an admin.
    fn take(&mut self, by: &Actor, index: Option<u32>) -> Step {
        let user = own(by)?;
        self.state.seatable(user)?;
        if self.state.seat_mode == SeatMode::Apply {
            self.require(by, Role::Admin)?;
        }
        let at = self.state.free_seat(index)?;
        self.seat_user(user, at);
        Ok(Some(self.seats_changed("take", Some(user), at as u32, by, json!({}))))
    }

    /// A member asks for a seat (apply mode): one pending per user, [`MAX_PENDING_SEATS`] per
    /// room.
    fn request(&mut self, by: &Actor, index: Option<u32>, expires_at_ms: i64) -> Step {
        let user = own(by)?;
        if self.state.seat_mode == SeatMode::Free {
            return Err(DomainError::WrongSeatMode { mode: SeatMode::Free });
        }
        self.open_pending(user, PendingKind::Request, index, expires_at_ms, by)?;
        Ok(Some(vec![event(
            EventType::RoomSeatRequested,
            with_index(json!({"user_id": user, "expires_at_ms": expires_at_ms}), index),
        )]))
    }

    /// The owner or an admin invites a member.
    fn invite(&mut self, by: &Actor, user: &UserId, index: Option<u32>, expires_at_ms: i64) -> Step {
        self.require(by, Role::Admin)?;
        self.open_pending(user, PendingKind::Invite, index, expires_at_ms, by)?;
        Ok(Some(vec![event(
            EventType::RoomSeatInvited,
            with_index(json!({"user_id": user, "expires_at_ms": expires_at_ms, "by": by}), index),
        )]))
    }

    fn open_pending(
        &mut self,
        user: &UserId,
        kind: PendingKind,
        index: Option<u32>,
        expires_at_ms: i64,
        by: &Actor,
    ) -> Result<(), DomainError> {
        self.state.seatable(user)?;
        if let Some(index) = index {
            self.state.seat_at(index)?;
        }
        if let Some(pending) = self.state.seat_pending.get(user) {
            return Err(DomainError::RequestPending {
                user_id: user.to_string(),
                kind: pending.kind.as_str(),
            });
        }
        if self.state.seat_pending.len() >= MAX_PENDING_SEATS {
            return Err(DomainError::TooManyRequests { max: MAX_PENDING_SEATS });
        }
        let pending = PendingSeat { kind, index, expires_at_ms, by: by.wire() };
        self.state.seat_pending.insert(user.clone(), pending.clone());
        self.changes.push(Change::SeatPendingSet { user_id: user.clone(), pending });
        Ok(())
    }

    /// Withdraws the actor's own request, or (owner/admin) an invitation to `user`.
    fn cancel(&mut self, by: &Actor, user: Option<&UserId>) -> Step {
        let (user, kind) = match (user, by) {
            (Some(user), Actor::User(me)) if user != me => (user, PendingKind::Invite),
            (Some(user), Actor::Service(_)) => (user, PendingKind::Invite),
            _ => (own(by)?, PendingKind::Request),
        };
        if kind == PendingKind::Invite {
            self.may_moderate(by, user)?;
        }
        self.take_pending(user, kind)?;
        Ok(Some(vec![closed(user, kind, "cancelled", by)]))
    }

    /// Accepts (seating its user) or turns down a pending request or invitation; one that ran
    /// out at `now_ms` can no longer be accepted (its expiry is on its way), only turned down.
    fn answer(&mut self, by: &Actor, user: &UserId, kind: PendingKind, accept: bool, now_ms: i64) -> Step {
        if accept && self.state.seat_pending.get(user).is_some_and(|p| p.expires_at_ms <= now_ms) {
            return Err(DomainError::NoSuchRequest { user_id: user.to_string(), kind: kind.as_str() });
        }
        let pending = self.take_pending(user, kind)?;
        if !accept {
            let reason = if kind == PendingKind::Request { "rejected" } else { "declined" };
            return Ok(Some(vec![closed(user, kind, reason, by)]));
        }
        let at = self.state.free_seat(pending.index)?;
        self.seat_user(user, at);
        let action = if kind == PendingKind::Request { "answer_request" } else { "answer_invite" };
        Ok(Some(self.seats_changed(action, Some(user), at as u32, by, json!({}))))
    }

    /// Locks a seat (its holder leaves it first) or unlocks it; `None` when it already is so.
    fn lock(&mut self, by: &Actor, index: u32, locked: bool) -> Step {
        self.require(by, Role::Admin)?;
        let at = self.state.seat_at(index)?;
        let holder = self.state.seats[at].user_id.clone();
        if let Some(holder) = &holder {
            self.state.may_act_on_seat_of(by, holder, self.now_ms)?;
        }
        if self.state.seats[at].locked == locked {
            return Ok(None);
        }
        let seat = &mut self.state.seats[at];
        seat.locked = locked;
        seat.user_id = None;
        Ok(Some(self.seats_changed("lock", holder.as_ref(), index, by, json!({"locked": locked}))))
    }

    /// Moves a seated user to seat `to`: a member itself in free mode (policy `cancel`), the
    /// owner or an admin anyone below it, with any policy.
    fn move_seat(&mut self, by: &Actor, user: &UserId, to: u32, policy: MovePolicy) -> Step {
        let to_at = self.state.seat_at(to)?;
        let itself = matches!(by, Actor::User(me) if me == user);
        if !itself {
            self.may_moderate(by, user)?;
        } else if self.state.seat_mode == SeatMode::Apply || policy != MovePolicy::Cancel {
            self.require(by, Role::Admin)?;
        }
        let from = self.state.seat_of(user).ok_or_else(|| not_seated(user))?;
        if from == to {
            return Ok(None);
        }
        let target = &self.state.seats[to_at];
        if target.locked {
            return Err(DomainError::SeatLocked { index: to });
        }
        let holder = target.user_id.clone();
        if let Some(holder) = &holder {
            if policy == MovePolicy::Cancel {
                return Err(DomainError::SeatOccupied { index: to });
            }
            self.state.may_act_on_seat_of(by, holder, self.now_ms)?;
        }
        let back = if policy == MovePolicy::Swap { holder.clone() } else { None };
        self.state.seats[from as usize].user_id = back;
        self.state.seats[to_at].user_id = Some(user.clone());
        let extra = json!({"from": from, "policy": policy, "displaced": holder});
        Ok(Some(self.seats_changed("move", Some(user), to, by, extra)))
    }

    /// A pending request or invitation ran out: `None` unless it is still the one pending
    /// (same kind, same expiry). Refused before it is due at `now_ms` (a clock stepped back
    /// since the scan saw it due): a refusal is not logged, so the expiry runs again later,
    /// where a logged no-op would replay forever.
    pub(super) fn expire_pending(
        &mut self,
        user: &UserId,
        kind: PendingKind,
        expires_at_ms: i64,
        now_ms: i64,
    ) -> Step {
        if now_ms < expires_at_ms {
            return Err(DomainError::InvalidArgument {
                field: "expires_at_ms",
                reason: format!("not due for {} ms", expires_at_ms - now_ms),
            });
        }
        let Some(pending) = self.state.seat_pending.get(user) else { return Ok(None) };
        if pending.kind != kind || pending.expires_at_ms != expires_at_ms {
            return Ok(None);
        }
        let index = pending.index;
        self.drop_pending(user);
        Ok(Some(vec![event(
            EventType::RoomSeatRequestExpired,
            with_index(json!({"user_id": user, "kind": kind}), index),
        )]))
    }

    /// A member leaving the room leaves its seat and drops its pending request or invitation;
    /// answers the seat list when it held a seat (its event carries it).
    pub(super) fn unseat(&mut self, user: &UserId) -> Option<Value> {
        if self.state.seat_pending.contains_key(user) {
            self.drop_pending(user);
        }
        let index = self.state.seat_of(user)?;
        self.state.seats[index as usize].user_id = None;
        Some(self.seat_list())
    }

    /// The room closes: every seat is left, every pending request dropped.
    pub(super) fn clear_seats(&mut self) {
        for seat in &mut self.state.seats {
            seat.user_id = None;
        }
        self.drop_all_pending();
    }

    fn drop_all_pending(&mut self) {
        let users: Vec<UserId> = self.state.seat_pending.keys().cloned().collect();
        for user in &users {
            self.drop_pending(user);
        }
    }

    /// The mode changes; becoming `free` drops every pending request and invitation. Answers
    /// whether it changed.
    pub(super) fn set_seat_mode(&mut self, mode: SeatMode) -> Result<bool, DomainError> {
        self.state.seats_enabled()?;
        if self.state.seat_mode == mode {
            return Ok(false);
        }
        self.state.seat_mode = mode;
        if mode == SeatMode::Free {
            self.drop_all_pending();
        }
        Ok(true)
    }

    fn take_pending(&mut self, user: &UserId, kind: PendingKind) -> Result<PendingSeat, DomainError> {
        match self.state.seat_pending.get(user) {
            Some(pending) if pending.kind == kind => {
                let pending = pending.clone();
                self.drop_pending(user);
                Ok(pending)
            }
            _ => Err(DomainError::NoSuchRequest { user_id: user.to_string(), kind: kind.as_str() }),
        }
    }

    fn drop_pending(&mut self, user: &UserId) {
        self.state.seat_pending.remove(user);
        self.changes.push(Change::SeatPendingDropped { user_id: user.clone() });
    }

    /// Seats `user` at position `at`, dropping what it had pending.
    fn seat_user(&mut self, user: &UserId, at: usize) {
        if self.state.seat_pending.contains_key(user) {
            self.drop_pending(user);
        }
        self.state.seats[at].user_id = Some(user.clone());
    }

    fn seat_list(&self) -> Value {
        json!(self.state.seats.iter().collect::<Vec<_>>())
    }

    /// The one event of a command that changed seats.
    fn seats_changed(
        &self,
        action: &str,
        user: Option<&UserId>,
        index: u32,
        by: &Actor,
        extra: Value,
    ) -> Vec<Event> {
        let mut cause = json!({"action": action, "user_id": user, "index": index, "by": by});
        if let (Some(cause), Value::Object(extra)) = (cause.as_object_mut(), extra) {
            cause.extend(extra);
        }
        vec![event(EventType::RoomSeatsChanged, json!({"seats": self.seat_list(), "cause": cause}))]
    }
}

fn not_seated(user: &UserId) -> DomainError {
    DomainError::NotSeated { user_id: user.to_string() }
}

fn closed(user: &UserId, kind: PendingKind, reason: &str, by: &Actor) -> Event {
    event(
        EventType::RoomSeatRequestClosed,
        json!({"user_id": user, "kind": kind, "reason": reason, "by": by}),
    )
}

fn with_index(mut payload: Value, index: Option<u32>) -> Value {
    if let (Some(index), Some(map)) = (index, payload.as_object_mut()) {
        map.insert("index".to_owned(), json!(index));
    }
    payload
}

#[cfg(test)]
#[path = "seats_tests.rs"]
mod tests;
