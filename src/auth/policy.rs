//! What a caller may do (docs/API.md "Authentication"): act only as itself — CreateRoom's
//! `owner_id`, Join/Leave's and a heartbeat's `user_id`, SendGift's `sender_id` must be the
//! caller; the batch heartbeat needs a service token; a service (or, with `mode: none`,
//! anyone) acts for anyone. A moderation command's actor (`by`) must be the caller too: a user
//! itself, a service its own `svc:<name>` or any user it acts for; only an anonymous caller
//! (mode none) closes a room naming nobody. The service's timer-driven commands (an idle
//! close, a stale eviction, a seat request's expiry) are nobody's to ask for. Who asks for a
//! command is the command's own exhaustive decision ([`Command::actor`]); what the actor's
//! role allows, only the room knows.

use super::{AuthError, Caller};
use crate::domain::{Acting, Actor, Command, UserId};

/// What a request asks to do, as far as authorization goes.
#[derive(Debug, Clone, Copy)]
pub enum Act<'a> {
    /// A room command.
    Command(&'a Command),
    /// One member's heartbeat.
    Heartbeat(&'a UserId),
    /// The batch heartbeat of a gateway.
    Heartbeats,
}

/// Refuses `act` unless `caller` may do it (a role in the room is the room's to check).
pub fn authorize(caller: &Caller, act: Act<'_>) -> Result<(), AuthError> {
    match act {
        Act::Command(command) => match command.actor() {
            Acting::User { field, user } => user_is_caller(caller, field, user),
            Acting::By(actor) => actor_is_caller(caller, Some(actor)),
            Acting::Nobody => actor_is_caller(caller, None),
            Acting::Timer { field } => Err(AuthError::Forbidden {
                field,
                why: "only the service itself issues this command (it is timer-driven)",
            }),
        },
        Act::Heartbeat(user_id) => user_is_caller(caller, "user_id", user_id),
        Act::Heartbeats => match caller {
            Caller::User(_) => Err(AuthError::Forbidden {
                field: "user_ids",
                why: "the batch heartbeat needs a service token",
            }),
            Caller::Service(_) | Caller::Anonymous => Ok(()),
        },
    }
}

/// Refuses unless `caller` may act as `user`, named by `field`.
fn user_is_caller(caller: &Caller, field: &'static str, user: &UserId) -> Result<(), AuthError> {
    if caller.may_act_as(user) {
        Ok(())
    } else {
        Err(AuthError::Forbidden {
            field,
            why: "must be the caller's own user id (only a service token acts for others)",
        })
    }
}

/// Refuses a command whose actor is not `caller` (nobody: only an anonymous caller's close).
fn actor_is_caller(caller: &Caller, by: Option<&Actor>) -> Result<(), AuthError> {
    let ok = match (by, caller) {
        (Some(Actor::User(user)), _) => caller.may_act_as(user),
        (Some(Actor::Service(name)), Caller::Service(me)) => name == me,
        (Some(Actor::Service(_)), Caller::User(_) | Caller::Anonymous) => false,
        (None, Caller::Anonymous) => true,
        (None, Caller::User(_) | Caller::Service(_)) => false,
    };
    if ok {
        Ok(())
    } else {
        Err(AuthError::Forbidden {
            field: "actor_id",
            why: "must be the caller (only a service token acts for others)",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{GiftId, LeaveReason};

    fn user(id: &str) -> UserId {
        UserId::parse(id).unwrap()
    }

    fn field_of(result: Result<(), AuthError>) -> Option<&'static str> {
        match result {
            Err(AuthError::Forbidden { field, .. }) => Some(field),
            Ok(()) => None,
            Err(other) => panic!("expected forbidden, got {other:?}"),
        }
    }

    #[test]
    fn a_user_acts_only_as_itself_naming_the_field_otherwise() {
        let alice = Caller::User(user("alice"));
        let create =
            Command::CreateRoom { owner_id: user("bob"), title: "t".into(), seats: Default::default() };
        let join = Command::JoinRoom { user_id: user("bob") };
        let leave = Command::LeaveRoom { user_id: user("bob"), reason: LeaveReason::User };
        let gift = Command::SendGift {
            sender_id: user("bob"),
            receiver_id: user("alice"),
            gift_id: GiftId::parse("rose").unwrap(),
            count: 1,
            unit_value: 1,
        };
        assert_eq!(field_of(authorize(&alice, Act::Command(&create))), Some("owner_id"));
        assert_eq!(field_of(authorize(&alice, Act::Command(&join))), Some("user_id"));
        assert_eq!(field_of(authorize(&alice, Act::Command(&leave))), Some("user_id"));
        assert_eq!(field_of(authorize(&alice, Act::Command(&gift))), Some("sender_id"));
        assert_eq!(field_of(authorize(&alice, Act::Heartbeat(&user("bob")))), Some("user_id"));
        assert_eq!(field_of(authorize(&alice, Act::Heartbeats)), Some("user_ids"));
        let bob = Caller::User(user("bob"));
        for command in [&create, &join, &leave, &gift] {
            assert_eq!(field_of(authorize(&bob, Act::Command(command))), None, "{command:?}");
        }
        assert_eq!(field_of(authorize(&bob, Act::Heartbeat(&user("bob")))), None);
    }

    #[test]
    fn services_and_anonymous_callers_act_for_anyone_and_a_moderator_is_the_caller() {
        let join = Command::JoinRoom { user_id: user("bob") };
        for caller in [Caller::Service("gateway".into()), Caller::Anonymous] {
            assert_eq!(field_of(authorize(&caller, Act::Command(&join))), None);
            assert_eq!(field_of(authorize(&caller, Act::Heartbeats)), None);
        }
        let mute = |by| Command::MuteUser { by, user_id: user("carol"), duration_s: 60 };
        let bob = Caller::User(user("bob"));
        assert_eq!(field_of(authorize(&bob, Act::Command(&mute(Actor::User(user("bob")))))), None);
        assert_eq!(
            field_of(authorize(&bob, Act::Command(&mute(Actor::User(user("alice")))))),
            Some("actor_id")
        );
        assert_eq!(
            field_of(authorize(&bob, Act::Command(&mute(Actor::Service("ops".into()))))),
            Some("actor_id")
        );
        let ops = Caller::Service("ops".into());
        assert_eq!(field_of(authorize(&ops, Act::Command(&mute(Actor::Service("ops".into()))))), None);
        assert_eq!(
            field_of(authorize(&ops, Act::Command(&mute(Actor::Service("root".into()))))),
            Some("actor_id")
        );
        let close_by_nobody = Command::CloseRoom { by: None, idle: false };
        assert_eq!(field_of(authorize(&Caller::Anonymous, Act::Command(&close_by_nobody))), None);
        assert_eq!(field_of(authorize(&bob, Act::Command(&close_by_nobody))), Some("actor_id"));
    }

    #[test]
    fn the_services_timer_driven_commands_are_refused_from_every_caller() {
        let leave = |reason| Command::LeaveRoom { user_id: user("bob"), reason };
        let timers = [
            (Command::CloseRoom { by: None, idle: true }, "idle"),
            (Command::CloseRoom { by: Some(Actor::User(user("bob"))), idle: true }, "idle"),
            (leave(LeaveReason::Stale), "reason"),
            (leave(LeaveReason::Closed), "reason"),
            (
                Command::ExpireSeatRequest {
                    user_id: user("bob"),
                    kind: crate::domain::PendingKind::Request,
                    expires_at_ms: 1,
                },
                "command",
            ),
        ];
        let callers = [Caller::User(user("bob")), Caller::Service("ops".into()), Caller::Anonymous];
        for (command, field) in &timers {
            for caller in &callers {
                assert_eq!(
                    field_of(authorize(caller, Act::Command(command))),
                    Some(*field),
                    "{caller:?} {command:?}"
                );
            }
        }
        assert_eq!(
            field_of(authorize(&Caller::User(user("bob")), Act::Command(&leave(LeaveReason::User)))),
            None
        );
    }
}
