//! A mic seat request of either API (SPEC §14.3) as a room command: the action's fields,
//! each required or refused by the action, and who acts.

use crate::api::ApiError;
use crate::api::rooms::moderator;
use crate::auth::Caller;
use crate::domain::{Actor, Command, MovePolicy, SeatAction, UserId};

/// The fields a seat request may carry, as either API read them (HTTP's JSON body, gRPC's
/// `SeatRequest`); which ones an action takes is [`seat_command`]'s to say.
#[derive(Debug, Default)]
pub struct SeatFields {
    /// Who acts (the caller, or whom a service acts for; required without authentication
    /// unless `user_id` names the actor of a self action).
    pub actor_id: Option<UserId>,
    /// The user acted on.
    pub user_id: Option<UserId>,
    /// A seat.
    pub index: Option<u32>,
    /// Accept or not.
    pub accept: Option<bool>,
    /// Lock or unlock.
    pub locked: Option<bool>,
    /// Mute or unmute.
    pub muted: Option<bool>,
    /// Where a move goes.
    pub to: Option<u32>,
    /// What a move does with a taken seat.
    pub policy: Option<MovePolicy>,
}

/// The actions a member does for itself only: without `actor_id`, `user_id` names who acts.
fn acts_for_itself(action: &str) -> bool {
    matches!(action, "take" | "leave" | "request" | "answer_invite")
}

/// Whether `user_id` names who acts, `actor_id` being absent: for an action a member does for
/// itself only; and without authentication, for `cancel_request` and `move` too (a member's
/// own, unless `actor_id` names the moderator). A token's user, or a service, moving someone
/// or withdrawing an invitation acts as itself.
fn user_id_acts(caller: &Caller, action: &str) -> bool {
    acts_for_itself(action)
        || (matches!(caller, Caller::Anonymous) && matches!(action, "cancel_request" | "move"))
}

/// The room command of `action` with `fields`, acting as the caller: 400 naming an unknown
/// action, a missing field or one the action does not take; 403 for a user naming another
/// actor.
pub fn seat_command(caller: &Caller, action: &str, fields: SeatFields) -> Result<Command, ApiError> {
    if !SeatAction::NAMES.contains(&action) {
        return Err(ApiError::invalid("action", format!("must be one of {}", SeatAction::NAMES.join(", "))));
    }
    let mut f = Fields { action, fields, taken: Vec::new() };
    let actor_id = f.fields.actor_id.take();
    let by = if actor_id.is_none() && user_id_acts(caller, action) {
        moderator(caller, f.fields.user_id.clone())?
    } else {
        moderator(caller, actor_id)?
    };
    let action = match action {
        "take" => SeatAction::Take { index: f.optional(|x| x.index.take(), "index") },
        "leave" => SeatAction::Leave,
        "request" => SeatAction::Request { index: f.optional(|x| x.index.take(), "index") },
        "cancel_request" => {
            let user_id = f.optional(|x| x.user_id.take(), "user_id");
            SeatAction::CancelRequest { user_id: user_id.filter(|u| !is(&by, u)) }
        }
        "answer_request" => SeatAction::AnswerRequest {
            user_id: f.required(|x| x.user_id.take(), "user_id")?,
            accept: f.required(|x| x.accept.take(), "accept")?,
        },
        "invite" => SeatAction::Invite {
            user_id: f.required(|x| x.user_id.take(), "user_id")?,
            index: f.optional(|x| x.index.take(), "index"),
        },
        "answer_invite" => SeatAction::AnswerInvite { accept: f.required(|x| x.accept.take(), "accept")? },
        "kick" => SeatAction::Kick { index: f.required(|x| x.index.take(), "index")? },
        "lock" => SeatAction::Lock {
            index: f.required(|x| x.index.take(), "index")?,
            locked: f.required(|x| x.locked.take(), "locked")?,
        },
        "mute" => SeatAction::Mute {
            index: f.required(|x| x.index.take(), "index")?,
            muted: f.required(|x| x.muted.take(), "muted")?,
        },
        _ => SeatAction::Move {
            user_id: match f.optional(|x| x.user_id.take(), "user_id") {
                Some(user) => user,
                None => acting_user(&by)?,
            },
            to: f.required(|x| x.to.take(), "to")?,
            policy: f.optional(|x| x.policy.take(), "policy").unwrap_or(MovePolicy::Cancel),
        },
    };
    // For an action of the actor's own `user_id` named the actor: taken as such.
    if acts_for_itself(f.action) && f.fields.user_id.as_ref().is_some_and(|u| is(&by, u)) {
        f.fields.user_id = None;
    }
    f.refuse_the_rest()?;
    Ok(Command::Seat { by, action })
}

/// The action's fields, taken one by one; what is left was not the action's.
struct Fields<'a> {
    action: &'a str,
    fields: SeatFields,
    taken: Vec<&'static str>,
}

impl Fields<'_> {
    fn optional<T>(
        &mut self,
        take: impl FnOnce(&mut SeatFields) -> Option<T>,
        name: &'static str,
    ) -> Option<T> {
        self.taken.push(name);
        take(&mut self.fields)
    }

    fn required<T>(
        &mut self,
        take: impl FnOnce(&mut SeatFields) -> Option<T>,
        name: &'static str,
    ) -> Result<T, ApiError> {
        let action = self.action;
        self.optional(take, name).ok_or_else(|| ApiError::invalid(name, format!("required by {action}")))
    }

    /// 400 naming the first field given that the action does not take.
    fn refuse_the_rest(&self) -> Result<(), ApiError> {
        let f = &self.fields;
        let given = [
            ("user_id", f.user_id.is_some()),
            ("index", f.index.is_some()),
            ("accept", f.accept.is_some()),
            ("locked", f.locked.is_some()),
            ("muted", f.muted.is_some()),
            ("to", f.to.is_some()),
            ("policy", f.policy.is_some()),
        ];
        match given.into_iter().find(|(_, given)| *given) {
            Some((name, _)) => Err(ApiError::invalid(name, format!("not taken by {}", self.action))),
            None => Ok(()),
        }
    }
}

fn is(by: &Actor, user: &UserId) -> bool {
    matches!(by, Actor::User(me) if me == user)
}

fn acting_user(by: &Actor) -> Result<UserId, ApiError> {
    match by {
        Actor::User(user) => Ok(user.clone()),
        Actor::Service(_) => Err(ApiError::invalid("user_id", "required when a service moves a seat")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(id: &str) -> UserId {
        UserId::parse(id).unwrap()
    }

    fn fields() -> SeatFields {
        SeatFields::default()
    }

    fn field_of(result: Result<Command, ApiError>) -> String {
        let error = result.expect_err("refused");
        error.message.split(':').next().unwrap_or_default().to_owned()
    }

    #[test]
    fn a_self_action_without_actor_id_acts_as_its_user_id() {
        let take =
            seat_command(&Caller::Anonymous, "take", SeatFields { user_id: Some(user("bob")), ..fields() });
        let expected =
            Command::Seat { by: Actor::User(user("bob")), action: SeatAction::Take { index: None } };
        assert_eq!(take.unwrap(), expected);
        // A user token acts as itself, and may not name another.
        let me = Caller::User(user("bob"));
        assert!(seat_command(&me, "leave", fields()).is_ok());
        let other = seat_command(&me, "take", SeatFields { user_id: Some(user("carol")), ..fields() });
        assert_eq!(other.expect_err("refused").code, "forbidden");
    }

    #[test]
    fn each_action_requires_its_fields_and_refuses_others() {
        let admin = || SeatFields { actor_id: Some(user("admin")), ..fields() };
        let anonymous = &Caller::Anonymous;
        assert_eq!(field_of(seat_command(anonymous, "kick", admin())), "index");
        assert_eq!(
            field_of(seat_command(anonymous, "lock", SeatFields { index: Some(1), ..admin() })),
            "locked"
        );
        assert_eq!(
            field_of(seat_command(
                anonymous,
                "kick",
                SeatFields { index: Some(1), muted: Some(true), ..admin() }
            )),
            "muted"
        );
        assert_eq!(
            field_of(seat_command(anonymous, "answer_request", SeatFields { accept: Some(true), ..admin() })),
            "user_id"
        );
        assert_eq!(field_of(seat_command(anonymous, "sit", admin())), "action");
        // Moderation needs its actor named.
        assert_eq!(
            field_of(seat_command(anonymous, "kick", SeatFields { index: Some(0), ..fields() })),
            "actor_id"
        );
        let moved = seat_command(
            anonymous,
            "move",
            SeatFields { user_id: Some(user("bob")), to: Some(2), ..fields() },
        );
        let expected = SeatAction::Move { user_id: user("bob"), to: 2, policy: MovePolicy::Cancel };
        assert_eq!(moved.unwrap(), Command::Seat { by: Actor::User(user("bob")), action: expected });
    }

    #[test]
    fn a_token_or_a_service_moving_someone_acts_as_itself() {
        let mv = || SeatFields {
            user_id: Some(user("bob")),
            to: Some(1),
            policy: Some(MovePolicy::Force),
            ..fields()
        };
        let action = || SeatAction::Move { user_id: user("bob"), to: 1, policy: MovePolicy::Force };
        let admin = seat_command(&Caller::User(user("adm")), "move", mv()).unwrap();
        assert_eq!(admin, Command::Seat { by: Actor::User(user("adm")), action: action() });
        let service = seat_command(&Caller::Service("ops".into()), "move", mv()).unwrap();
        assert_eq!(service, Command::Seat { by: Actor::Service("ops".into()), action: action() });
        let cancel = SeatFields { user_id: Some(user("bob")), ..fields() };
        let withdrawn = seat_command(&Caller::User(user("adm")), "cancel_request", cancel).unwrap();
        let action = SeatAction::CancelRequest { user_id: Some(user("bob")) };
        assert_eq!(withdrawn, Command::Seat { by: Actor::User(user("adm")), action });
    }

    #[test]
    fn cancel_request_names_an_invitation_only_when_it_names_another_user() {
        let own = seat_command(
            &Caller::Anonymous,
            "cancel_request",
            SeatFields { user_id: Some(user("bob")), ..fields() },
        );
        let expected = SeatAction::CancelRequest { user_id: None };
        assert_eq!(own.unwrap(), Command::Seat { by: Actor::User(user("bob")), action: expected });
        let invitation = SeatFields { actor_id: Some(user("admin")), user_id: Some(user("bob")), ..fields() };
        let expected = SeatAction::CancelRequest { user_id: Some(user("bob")) };
        let by = Actor::User(user("admin"));
        assert_eq!(
            seat_command(&Caller::Anonymous, "cancel_request", invitation).unwrap(),
            Command::Seat { by, action: expected }
        );
    }
}
