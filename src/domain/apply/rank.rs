//! Who outranks whom in a room, at the command's clock (docs/API.md, "Roles and who acts"):
//! the rank an actor acts with, who it may moderate, and who may lift or cut short a mute or a
//! ban.
//!
//! - A user's rank is its role ([`Role`]): owner ⊃ admin ⊃ member; a service ranks above all.
//! - A user banned at the command's clock acts with no rank above member, whatever its role: a
//!   banned admin (or owner) moderates nothing while banned. As a target, or as the setter of a
//!   sanction, a user keeps its role.
//! - A sanction (a mute or a ban in force) is lifted — or cut short — only by a rank above its
//!   setter's rank now (a service setter ranks above the owner; a setter since removed as admin
//!   ranks as the member it now is), by a service, or by its setter on someone else. Nobody lifts
//!   a sanction on itself unless it outranks who set it: an admin that muted or kicked itself,
//!   or that the owner muted or banned, waits for the owner (or the end).

use super::moderation::Role;
use crate::domain::command::Actor;
use crate::domain::error::DomainError;
use crate::domain::ids::UserId;
use crate::domain::state::{Restriction, RestrictionKind, RoomState};

impl RoomState {
    /// The rank `actor` acts with at `now_ms`: its role, or a member's while a ban holds it.
    pub fn role_of(&self, actor: &Actor, now_ms: i64) -> Role {
        match actor {
            Actor::Service(_) => Role::Service,
            Actor::User(user) if self.ban_of(user, now_ms).is_some() => Role::Member,
            Actor::User(user) => self.user_role(user),
        }
    }

    /// A user's role here (as a target or a setter: a ban does not change it).
    pub fn user_role(&self, user: &UserId) -> Role {
        if *user == self.owner_id {
            Role::Owner
        } else if self.admins.contains(user) {
            Role::Admin
        } else {
            Role::Member
        }
    }

    /// Refuses `actor` unless the rank it acts with at `now_ms` is at least `needs`: a role
    /// below it is [`DomainError::Forbidden`], a role that a ban suspends
    /// [`DomainError::SuspendedByBan`].
    pub fn require(&self, actor: &Actor, needs: Role, now_ms: i64) -> Result<Role, DomainError> {
        let role = self.role_of(actor, now_ms);
        if role >= needs {
            return Ok(role);
        }
        if let Actor::User(user) = actor
            && self.user_role(user) >= needs
            && let Some(ban) = self.ban_of(user, now_ms)
        {
            return Err(DomainError::SuspendedByBan { until_ms: ban.until_ms });
        }
        Err(DomainError::Forbidden { needs: needs.as_str() })
    }

    /// Refuses `actor` moderating `target` unless it is an admin at least (not banned) and
    /// ranks above the target (its own self aside): an admin moderates members, the owner admins
    /// too, a service anyone.
    pub fn may_moderate(&self, actor: &Actor, target: &UserId, now_ms: i64) -> Result<(), DomainError> {
        let role = self.require(actor, Role::Admin, now_ms)?;
        let target_role = self.user_role(target);
        if matches!(actor, Actor::User(me) if me == target) && target_role != Role::Owner {
            return Ok(());
        }
        if role > target_role {
            Ok(())
        } else {
            let needs = if target_role == Role::Owner { Role::Service } else { Role::Owner };
            Err(DomainError::Forbidden { needs: needs.as_str() })
        }
    }

    /// Refuses `actor` lifting (or cutting short) `target`'s sanction of `kind` in force at
    /// `now_ms`, unless it is a service, ranks above the sanction's setter, or set it itself on
    /// someone else. Nothing in force: nothing to refuse.
    pub fn may_lift(
        &self,
        actor: &Actor,
        target: &UserId,
        kind: RestrictionKind,
        now_ms: i64,
    ) -> Result<(), DomainError> {
        match self.sanction(kind, target, now_ms) {
            Some(sanction) if !self.lifts(actor, target, sanction, now_ms) => {
                let setter = self.setter_rank(sanction);
                Err(DomainError::LiftForbidden {
                    kind: kind.as_str(),
                    setter: setter.as_str(),
                    needs: rank_above(setter).as_str(),
                })
            }
            Some(_) | None => Ok(()),
        }
    }

    /// Who a new sanction of `kind` on `target` until `until_ms`, imposed by `actor`, is
    /// recorded as set by (its `by`): `actor` over nothing in force or over one it may lift;
    /// over one it may not, the sanction stays its setter's, and only a sanction that ends no
    /// earlier may be imposed (a shorter one would cut it short: refused as a lift).
    pub fn setter_of_new(
        &self,
        actor: &Actor,
        target: &UserId,
        kind: RestrictionKind,
        until_ms: i64,
        now_ms: i64,
    ) -> Result<String, DomainError> {
        match self.sanction(kind, target, now_ms) {
            Some(sanction) if !self.lifts(actor, target, sanction, now_ms) => {
                if until_ms < sanction.until_ms {
                    self.may_lift(actor, target, kind, now_ms)?;
                }
                Ok(sanction.by.clone())
            }
            Some(_) | None => Ok(actor.wire()),
        }
    }

    /// `target`'s sanction of `kind` in force at `now_ms`.
    fn sanction(&self, kind: RestrictionKind, target: &UserId, now_ms: i64) -> Option<&Restriction> {
        let map = match kind {
            RestrictionKind::Mute => &self.mutes,
            RestrictionKind::Ban => &self.bans,
        };
        map.get(target).filter(|r| r.holds_at(now_ms))
    }

    /// Whether `actor` may lift `sanction`, held by `target`.
    fn lifts(&self, actor: &Actor, target: &UserId, sanction: &Restriction, now_ms: i64) -> bool {
        let own = match actor {
            Actor::Service(_) => return true,
            Actor::User(me) => me != target && sanction.by == me.as_str(),
        };
        own || self.role_of(actor, now_ms) > self.setter_rank(sanction)
    }

    /// The rank of a sanction's setter now: a service above all, a user by its role; a `by`
    /// that does not read as an actor counts as a service's (only a service lifts it).
    fn setter_rank(&self, sanction: &Restriction) -> Role {
        match Actor::try_from(sanction.by.clone()) {
            Ok(Actor::User(user)) => self.user_role(&user),
            Ok(Actor::Service(_)) | Err(_) => Role::Service,
        }
    }
}

/// The least rank above `role`: who may lift what `role` set.
fn rank_above(role: Role) -> Role {
    match role {
        Role::Member => Role::Admin,
        Role::Admin => Role::Owner,
        Role::Owner | Role::Service => Role::Service,
    }
}
