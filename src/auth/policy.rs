//! What a caller may do (SPEC §12.3): act only as itself — CreateRoom's `owner_id`,
//! Join/Leave's and a heartbeat's `user_id`, SendGift's `sender_id` must be the caller; the
//! batch heartbeat needs a service token; a service (or, with `mode: none`, anyone) acts for
//! anyone. Closing a room is the owner's alone, which only the room knows:
//! [`owner_may_close`] is asked with the room's owner.

use super::{AuthError, Caller};
use crate::domain::{Command, UserId};

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

/// Refuses `act` unless `caller` may do it (CloseRoom: see [`owner_may_close`]).
pub fn authorize(caller: &Caller, act: Act<'_>) -> Result<(), AuthError> {
    let (field, user) = match act {
        Act::Command(Command::CreateRoom { owner_id, .. }) => ("owner_id", owner_id),
        Act::Command(Command::JoinRoom { user_id } | Command::LeaveRoom { user_id, .. }) => {
            ("user_id", user_id)
        }
        Act::Command(Command::SendGift { sender_id, .. }) => ("sender_id", sender_id),
        Act::Command(Command::CloseRoom) => return Ok(()),
        Act::Heartbeat(user_id) => ("user_id", user_id),
        Act::Heartbeats if matches!(caller, Caller::User(_)) => {
            return Err(AuthError::Forbidden {
                field: "user_ids",
                why: "the batch heartbeat needs a service token",
            });
        }
        Act::Heartbeats => return Ok(()),
    };
    if caller.may_act_as(user) {
        Ok(())
    } else {
        Err(AuthError::Forbidden {
            field,
            why: "must be the caller's own user id (only a service token acts for others)",
        })
    }
}

/// Refuses closing a room owned by `owner` unless `caller` is that owner (or a service).
pub fn owner_may_close(caller: &Caller, owner: &UserId) -> Result<(), AuthError> {
    if caller.may_act_as(owner) {
        Ok(())
    } else {
        Err(AuthError::Forbidden { field: "room_id", why: "only the room's owner closes it" })
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
        let create = Command::CreateRoom { owner_id: user("bob"), title: "t".into() };
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
    fn services_and_anonymous_callers_act_for_anyone_and_only_the_owner_closes() {
        let join = Command::JoinRoom { user_id: user("bob") };
        for caller in [Caller::Service("gateway".into()), Caller::Anonymous] {
            assert_eq!(field_of(authorize(&caller, Act::Command(&join))), None);
            assert_eq!(field_of(authorize(&caller, Act::Heartbeats)), None);
            assert_eq!(field_of(owner_may_close(&caller, &user("alice"))), None);
        }
        assert_eq!(field_of(owner_may_close(&Caller::User(user("bob")), &user("alice"))), Some("room_id"));
        assert_eq!(field_of(owner_may_close(&Caller::User(user("alice")), &user("alice"))), None);
    }
}
