//! The commands of roles and moderation (SPEC §14.2): who may do what, and what each changes.
//!
//! Rights: owner ⊃ admin ⊃ member. Only the owner appoints admins (and closes the room); the
//! owner and admins moderate members; nobody moderates the owner, an admin no other admin; a
//! service token may do anything. Ranks at the command's clock — a banned user's, and who may
//! lift a mute or a ban — are [`super::rank`]'s.

use serde_json::json;

use super::{Draft, event};
use crate::domain::command::{Actor, InfoChange};
use crate::domain::error::DomainError;
use crate::domain::event::{Event, EventType};
use crate::domain::ids::UserId;
use crate::domain::state::{Restriction, RestrictionKind};

/// Longest mute or ban: 30 days, in seconds.
pub const MAX_RESTRICTION_S: u32 = 30 * 24 * 3600;
/// Longest kick reason, in bytes.
pub const MAX_REASON_BYTES: usize = 200;
/// Longest title set through `/info`, in characters.
pub const MAX_INFO_TITLE_CHARS: usize = 64;
/// Longest announcement, in bytes.
pub const MAX_ANNOUNCEMENT_BYTES: usize = 1_000;
/// Longest cover URL, in bytes.
pub const MAX_COVER_URL_BYTES: usize = 512;
/// A kick's ban when the request names none, in seconds.
pub const DEFAULT_BAN_S: u32 = 60;
/// Default `rooms.max_admins`.
pub const DEFAULT_MAX_ADMINS: usize = 5;

/// A role in a room, lowest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Role {
    /// Everyone else.
    Member,
    /// Appointed by the owner.
    Admin,
    /// The creator.
    Owner,
    /// A service token: anything.
    Service,
}

impl Role {
    /// The name a 403 needs.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Member => "member",
            Role::Admin => "admin",
            Role::Owner => "owner",
            Role::Service => "service",
        }
    }
}

impl Draft {
    /// The owner appoints (or removes) an admin; `None` when nothing changes.
    pub(super) fn set_admin(
        &mut self,
        by: &Actor,
        user_id: &UserId,
        admin: bool,
        max_admins: usize,
    ) -> Result<Option<Vec<Event>>, DomainError> {
        self.require(by, Role::Owner)?;
        let next = &mut self.state;
        if *user_id == next.owner_id {
            return Err(DomainError::InvalidArgument {
                field: "user_id",
                reason: "is the room's owner".into(),
            });
        }
        if next.admins.contains(user_id) == admin {
            return Ok(None);
        }
        if admin {
            if next.admins.len() >= max_admins {
                return Err(DomainError::TooManyAdmins { max: max_admins });
            }
            next.admins.insert(user_id.clone());
        } else {
            next.admins.remove(user_id);
        }
        let role = if admin { "admin" } else { "member" };
        Ok(Some(vec![event(EventType::RoomRoleChanged, json!({"user_id": user_id, "role": role, "by": by}))]))
    }

    /// Mutes a user until `now + duration_s` (0 lifts the mute; `None` when there is none).
    pub(super) fn mute(
        &mut self,
        by: &Actor,
        user_id: &UserId,
        duration_s: u32,
        now_ms: i64,
    ) -> Result<Option<Vec<Event>>, DomainError> {
        check_duration("duration_s", duration_s)?;
        self.may_moderate(by, user_id)?;
        if duration_s == 0 {
            self.state.may_lift(by, user_id, RestrictionKind::Mute, now_ms)?;
            let lifted = self.state.mutes.remove(user_id).is_some_and(|m| m.holds_at(now_ms));
            self.lift(RestrictionKind::Mute, user_id);
            return Ok(lifted
                .then(|| vec![event(EventType::RoomUserUnmuted, json!({"user_id": user_id, "by": by}))]));
        }
        let until_ms = now_ms.saturating_add(i64::from(duration_s) * 1000);
        let setter = self.state.setter_of_new(by, user_id, RestrictionKind::Mute, until_ms, now_ms)?;
        self.restrict(RestrictionKind::Mute, user_id, until_ms, String::new(), setter);
        Ok(Some(vec![event(
            EventType::RoomUserMuted,
            json!({"user_id": user_id, "until_ms": until_ms, "by": by}),
        )]))
    }

    /// Removes a user (and their presence) and bans them until `now + ban_s` (0: no ban).
    pub(super) fn kick(
        &mut self,
        by: &Actor,
        user_id: &UserId,
        ban_s: u32,
        reason: &str,
        now_ms: i64,
    ) -> Result<Vec<Event>, DomainError> {
        check_duration("ban_s", ban_s)?;
        check_text("reason", reason, MAX_REASON_BYTES, false)?;
        self.may_moderate(by, user_id)?;
        let until_ms = (ban_s > 0).then(|| now_ms.saturating_add(i64::from(ban_s) * 1000));
        let ban = until_ms
            .map(|until| {
                self.state.setter_of_new(by, user_id, RestrictionKind::Ban, until, now_ms).map(|s| (until, s))
            })
            .transpose()?;
        let was_member = self.state.members.contains_key(user_id);
        if ban_s == 0 && !was_member {
            return Err(DomainError::NotMember { user_id: user_id.to_string() });
        }
        if was_member {
            self.state.members.remove(user_id);
            self.changes.push(super::Change::MemberLeft { user_id: user_id.clone() });
        }
        let seats = self.unseat(user_id);
        if let Some((until_ms, setter)) = ban {
            self.restrict(RestrictionKind::Ban, user_id, until_ms, reason.to_owned(), setter);
        }
        let mut payload = json!({
            "user_id": user_id, "until_ms": until_ms, "reason": reason, "by": by,
            "member_count": self.state.members.len(),
        });
        super::with_seats(&mut payload, seats);
        Ok(vec![event(EventType::RoomUserKicked, payload)])
    }

    /// Lifts a ban; `None` when there is none in force.
    pub(super) fn unban(
        &mut self,
        by: &Actor,
        user_id: &UserId,
        now_ms: i64,
    ) -> Result<Option<Vec<Event>>, DomainError> {
        self.may_moderate(by, user_id)?;
        self.state.may_lift(by, user_id, RestrictionKind::Ban, now_ms)?;
        let lifted = self.state.bans.remove(user_id).is_some_and(|b| b.holds_at(now_ms));
        self.lift(RestrictionKind::Ban, user_id);
        Ok(lifted.then(|| vec![event(EventType::RoomUserUnbanned, json!({"user_id": user_id, "by": by}))]))
    }

    /// Mutes or unmutes everyone; `None` when it already is so.
    pub(super) fn mute_all(&mut self, by: &Actor, muted: bool) -> Result<Option<Vec<Event>>, DomainError> {
        self.require(by, Role::Admin)?;
        if self.state.muted_all == muted {
            return Ok(None);
        }
        self.state.muted_all = muted;
        Ok(Some(vec![event(EventType::RoomMuteAllChanged, json!({"muted": muted, "by": by}))]))
    }

    /// Changes the title, announcement or cover; `None` when every field given is as it was.
    pub(super) fn update_info(
        &mut self,
        by: &Actor,
        info: &InfoChange,
    ) -> Result<Option<Vec<Event>>, DomainError> {
        check_info(info)?;
        self.require(by, Role::Admin)?;
        let next = &mut self.state;
        let mut changed = serde_json::Map::new();
        for (field, new, old) in [
            ("title", &info.title, &mut next.title),
            ("announcement", &info.announcement, &mut next.announcement),
            ("cover_url", &info.cover_url, &mut next.cover_url),
        ] {
            if let Some(new) = new.as_ref().filter(|new| *new != old) {
                old.clone_from(new);
                changed.insert(field.to_owned(), json!(new));
            }
        }
        if let Some(mode) = info.seat_mode
            && self.set_seat_mode(mode)?
        {
            changed.insert("seat_mode".to_owned(), json!(mode));
        }
        if changed.is_empty() {
            return Ok(None);
        }
        changed.insert("by".to_owned(), json!(by));
        Ok(Some(vec![event(EventType::RoomInfoChanged, serde_json::Value::Object(changed))]))
    }

    /// Records a mute or ban, set by `by` (an actor's wire form: see [`RoomState::setter_of_new`]).
    ///
    /// [`RoomState::setter_of_new`]: crate::domain::state::RoomState::setter_of_new
    fn restrict(
        &mut self,
        kind: RestrictionKind,
        user_id: &UserId,
        until_ms: i64,
        reason: String,
        by: String,
    ) {
        let restriction = Restriction { until_ms, reason, by };
        let map = match kind {
            RestrictionKind::Mute => &mut self.state.mutes,
            RestrictionKind::Ban => &mut self.state.bans,
        };
        map.insert(user_id.clone(), restriction.clone());
        self.changes.push(super::Change::Restricted { kind, user_id: user_id.clone(), restriction });
    }

    fn lift(&mut self, kind: RestrictionKind, user_id: &UserId) {
        self.changes.push(super::Change::Lifted { kind, user_id: user_id.clone() });
    }
}

fn check_duration(field: &'static str, seconds: u32) -> Result<(), DomainError> {
    if seconds <= MAX_RESTRICTION_S {
        Ok(())
    } else {
        Err(DomainError::InvalidArgument {
            field,
            reason: format!("must be 0–{MAX_RESTRICTION_S} seconds (30 days)"),
        })
    }
}

/// At most `max` bytes without control characters (a newline allowed when `lines`).
pub(super) fn check_text(
    field: &'static str,
    text: &str,
    max: usize,
    lines: bool,
) -> Result<(), DomainError> {
    if text.len() > max {
        return Err(DomainError::InvalidArgument { field, reason: format!("must be at most {max} bytes") });
    }
    if text.chars().any(|c| c.is_control() && !(lines && c == '\n')) {
        return Err(DomainError::InvalidArgument {
            field,
            reason: "must not hold control characters".into(),
        });
    }
    Ok(())
}

fn check_info(info: &InfoChange) -> Result<(), DomainError> {
    if info.title.is_none()
        && info.announcement.is_none()
        && info.cover_url.is_none()
        && info.seat_mode.is_none()
    {
        return Err(DomainError::InvalidArgument {
            field: "info",
            reason: "give at least one of title, announcement, cover_url, seat_mode".into(),
        });
    }
    if let Some(title) = &info.title {
        super::check_title(title, MAX_INFO_TITLE_CHARS)?;
    }
    if let Some(announcement) = &info.announcement {
        check_text("announcement", announcement, MAX_ANNOUNCEMENT_BYTES, true)?;
    }
    if let Some(url) = info.cover_url.as_deref().filter(|u| !u.is_empty()) {
        super::cover::check_cover_url(url)?;
    }
    Ok(())
}

#[cfg(test)]
#[path = "moderation_tests.rs"]
pub(super) mod tests;
