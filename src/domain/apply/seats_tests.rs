//! The seat actions (SPEC §14.3): each rule and each refusal.

use serde_json::json;

use super::*;
use crate::domain::apply::moderation::tests::{by, run, run_at};
use crate::domain::apply::tests::{ctx, user};
use crate::domain::command::InfoChange;
use crate::domain::{Applied, Command, LeaveReason};

const TTL: i64 = crate::domain::DEFAULT_SEAT_REQUEST_TTL_MS;

fn seat(actor: &str, action: SeatAction) -> Command {
    Command::Seat { by: by(actor), action }
}

fn take(actor: &str, index: Option<u32>) -> Command {
    seat(actor, SeatAction::Take { index })
}

/// A room of `owner` with `count` seats in `mode`, admin `adm`, members `owner`, `adm`, `m1`–`m3`.
fn room(count: u32, mode: SeatMode) -> RoomState {
    let create = Command::CreateRoom {
        owner_id: user("owner"),
        title: "Voice".into(),
        seats: SeatConfig { count, mode },
    };
    let mut state = crate::domain::apply(None, &create, &ctx(0)).unwrap().state;
    for id in ["owner", "adm", "m1", "m2", "m3"] {
        state = run(&state, Command::JoinRoom { user_id: user(id) }).unwrap().state;
    }
    run(&state, Command::SetAdmin { by: by("owner"), user_id: user("adm"), admin: true }).unwrap().state
}

fn holders(state: &RoomState) -> Vec<Option<&str>> {
    state.seats.iter().map(|s| s.user_id.as_ref().map(UserId::as_str)).collect()
}

/// The one event of an applied command.
fn only_event(applied: &Applied) -> &Event {
    assert_eq!(applied.events.len(), 1, "{:?}", applied.events);
    &applied.events[0]
}

#[test]
fn a_room_has_the_seats_it_was_created_with_and_no_more_than_twenty() {
    let state = room(3, SeatMode::Free);
    assert_eq!(holders(&state), [None, None, None]);
    let view = serde_json::to_value(state.snapshot()).unwrap();
    assert_eq!(view["seat_mode"], "free");
    assert_eq!(view["seats"][2], json!({"index": 2, "user_id": null, "locked": false, "muted": false}));
    let create = |count| Command::CreateRoom {
        owner_id: user("o"),
        title: "t".into(),
        seats: SeatConfig { count, mode: SeatMode::Free },
    };
    let refused = crate::domain::apply(None, &create(21), &ctx(0));
    assert!(matches!(refused, Err(DomainError::InvalidArgument { field: "seats.count", .. })), "{refused:?}");
    assert_eq!(crate::domain::apply(None, &create(20), &ctx(0)).unwrap().state.seats.len(), 20);
    let moded = Command::CreateRoom {
        owner_id: user("o"),
        title: "t".into(),
        seats: SeatConfig { count: 0, mode: SeatMode::Apply },
    };
    let refused = crate::domain::apply(None, &moded, &ctx(0));
    assert!(matches!(refused, Err(DomainError::InvalidArgument { field: "seats.mode", .. })), "{refused:?}");
    // Without seats, every action is 409 seats_disabled.
    let none = room(0, SeatMode::Free);
    assert_eq!(run(&none, take("m1", None)), Err(DomainError::SeatsDisabled));
    assert_eq!(run(&none, seat("adm", SeatAction::Kick { index: 0 })), Err(DomainError::SeatsDisabled));
}

#[test]
fn take_seats_the_caller_on_the_seat_named_or_the_lowest_free_one() {
    let state = room(3, SeatMode::Free);
    let applied = run(&state, take("m1", Some(1))).unwrap();
    let event = only_event(&applied);
    assert_eq!(event.event_type, EventType::RoomSeatsChanged);
    assert_eq!(event.payload["cause"], json!({"action": "take", "user_id": "m1", "index": 1, "by": "m1"}));
    assert_eq!(event.payload["seats"][1]["user_id"], "m1");
    let state = applied.state;
    let state = run(&state, take("m2", None)).unwrap().state;
    assert_eq!(holders(&state), [Some("m2"), Some("m1"), None]);
    // Each refusal names what is wrong.
    assert_eq!(run(&state, take("m3", Some(1))), Err(DomainError::SeatOccupied { index: 1 }));
    let seated = run(&state, take("m1", Some(2)));
    assert_eq!(seated, Err(DomainError::AlreadySeated { user_id: "m1".into(), index: 1 }));
    assert!(matches!(
        run(&state, take("m3", Some(3))),
        Err(DomainError::InvalidArgument { field: "index", .. })
    ));
    assert_eq!(
        run(&state, take("stranger", None)),
        Err(DomainError::NotMember { user_id: "stranger".into() })
    );
    let state = run(&state, take("m3", None)).unwrap().state;
    assert_eq!(run(&state, take("adm", None)), Err(DomainError::SeatsFull));
    // A service holds no seat.
    let service =
        Command::Seat { by: Actor::Service("ops".into()), action: SeatAction::Take { index: None } };
    assert!(matches!(run(&state, service), Err(DomainError::InvalidArgument { field: "actor_id", .. })));
}

#[test]
fn in_apply_mode_a_member_requests_and_an_admin_answers() {
    let state = room(2, SeatMode::Apply);
    assert_eq!(run(&state, take("m1", None)), Err(DomainError::Forbidden { needs: "admin" }));
    assert_eq!(holders(&run(&state, take("adm", None)).unwrap().state), [Some("adm"), None]);
    let applied = run(&state, seat("m1", SeatAction::Request { index: Some(1) })).unwrap();
    let event = only_event(&applied);
    assert_eq!(event.event_type, EventType::RoomSeatRequested);
    assert_eq!(event.payload, json!({"user_id": "m1", "index": 1, "expires_at_ms": 1_000 + TTL}));
    let state = applied.state;
    let again = run(&state, seat("m1", SeatAction::Request { index: None }));
    assert_eq!(again, Err(DomainError::RequestPending { user_id: "m1".into(), kind: "request" }));
    // Only the owner and admins answer.
    let answer = |actor: &str, who: &str, accept| {
        seat(actor, SeatAction::AnswerRequest { user_id: user(who), accept })
    };
    assert_eq!(run(&state, answer("m2", "m1", true)), Err(DomainError::Forbidden { needs: "admin" }));
    let accepted = run(&state, answer("adm", "m1", true)).unwrap();
    let event = only_event(&accepted);
    assert_eq!(event.payload["cause"]["action"], "answer_request");
    assert_eq!(event.payload["cause"]["by"], "adm");
    assert_eq!(holders(&accepted.state), [None, Some("m1")]);
    assert!(accepted.state.seat_pending.is_empty());
    // A rejection closes the request; a second answer finds none.
    let rejected = run(&state, answer("owner", "m1", false)).unwrap();
    let event = only_event(&rejected);
    assert_eq!(event.event_type, EventType::RoomSeatRequestClosed);
    assert_eq!(
        event.payload,
        json!({"user_id": "m1", "kind": "request", "reason": "rejected", "by": "owner"})
    );
    let none = run(&rejected.state, answer("owner", "m1", true));
    assert_eq!(none, Err(DomainError::NoSuchRequest { user_id: "m1".into(), kind: "request" }));
    // In free mode there is nothing to request.
    let free = room(2, SeatMode::Free);
    let refused = run(&free, seat("m1", SeatAction::Request { index: None }));
    assert_eq!(refused, Err(DomainError::WrongSeatMode { mode: SeatMode::Free }));
}

#[test]
fn two_admins_accepting_two_requests_for_the_last_seat_seat_one() {
    let mut state = room(1, SeatMode::Apply);
    for who in ["m1", "m2"] {
        state = run(&state, seat(who, SeatAction::Request { index: None })).unwrap().state;
    }
    let answer =
        |actor: &str, who: &str| seat(actor, SeatAction::AnswerRequest { user_id: user(who), accept: true });
    let first = run(&state, answer("adm", "m1")).unwrap().state;
    let second = run(&first, answer("owner", "m2"));
    assert_eq!(second, Err(DomainError::SeatsFull));
    assert_eq!(holders(&first), [Some("m1")]);
    // The refused accept wrote nothing: m2's request is still pending.
    assert!(first.seat_pending.contains_key(&user("m2")));
}

#[test]
fn requests_are_one_per_user_and_a_hundred_per_room() {
    let mut state = room(1, SeatMode::Apply);
    for i in 0..=MAX_PENDING_SEATS {
        state = run(&state, Command::JoinRoom { user_id: user(&format!("u{i}")) }).unwrap().state;
    }
    for i in 0..MAX_PENDING_SEATS {
        state = run(&state, seat(&format!("u{i}"), SeatAction::Request { index: None })).unwrap().state;
    }
    let last = run(&state, seat(&format!("u{MAX_PENDING_SEATS}"), SeatAction::Request { index: None }));
    assert_eq!(last, Err(DomainError::TooManyRequests { max: MAX_PENDING_SEATS }));
    let invite = seat("adm", SeatAction::Invite { user_id: user("m1"), index: None });
    assert_eq!(run(&state, invite), Err(DomainError::TooManyRequests { max: MAX_PENDING_SEATS }));
    // Switching to free drops them all, in the one RoomInfoChanged.
    let info = InfoChange { seat_mode: Some(SeatMode::Free), ..InfoChange::default() };
    let freed = run(&state, Command::UpdateRoomInfo { by: by("owner"), info }).unwrap();
    assert_eq!(only_event(&freed).payload, json!({"seat_mode": "free", "by": "owner"}));
    assert!(freed.state.seat_pending.is_empty());
    assert_eq!(freed.changes.len(), MAX_PENDING_SEATS);
}

#[test]
fn an_invitation_is_answered_by_its_invitee_or_withdrawn_by_an_admin() {
    let state = room(2, SeatMode::Free);
    let invite = |actor: &str| seat(actor, SeatAction::Invite { user_id: user("m1"), index: Some(1) });
    assert_eq!(run(&state, invite("m2")), Err(DomainError::Forbidden { needs: "admin" }));
    let invited = run(&state, invite("adm")).unwrap();
    let event = only_event(&invited);
    assert_eq!(event.event_type, EventType::RoomSeatInvited);
    assert_eq!(
        event.payload,
        json!({"user_id": "m1", "index": 1, "expires_at_ms": 1_000 + TTL, "by": "adm"})
    );
    let state = invited.state;
    let accepted = run(&state, seat("m1", SeatAction::AnswerInvite { accept: true })).unwrap();
    assert_eq!(holders(&accepted.state), [None, Some("m1")]);
    assert_eq!(only_event(&accepted).payload["cause"]["action"], "answer_invite");
    let declined = run(&state, seat("m1", SeatAction::AnswerInvite { accept: false })).unwrap();
    assert_eq!(only_event(&declined).payload["reason"], "declined");
    // Someone else's answer finds no invitation of theirs.
    let other = run(&state, seat("m2", SeatAction::AnswerInvite { accept: true }));
    assert_eq!(other, Err(DomainError::NoSuchRequest { user_id: "m2".into(), kind: "invite" }));
    let withdrawn =
        run(&state, seat("owner", SeatAction::CancelRequest { user_id: Some(user("m1")) })).unwrap();
    assert_eq!(only_event(&withdrawn).payload["kind"], "invite");
    assert_eq!(only_event(&withdrawn).payload["reason"], "cancelled");
    // A member cannot withdraw an invitation; its own cancel finds no request.
    let own = run(&state, seat("m1", SeatAction::CancelRequest { user_id: None }));
    assert_eq!(own, Err(DomainError::NoSuchRequest { user_id: "m1".into(), kind: "request" }));
}

#[test]
fn kick_lock_and_mute_are_the_owners_and_admins_and_spare_the_owner() {
    let state = room(3, SeatMode::Free);
    let state = run(&state, take("owner", Some(0))).unwrap().state;
    let state = run(&state, take("m1", Some(1))).unwrap().state;
    let kick = |actor: &str, index| seat(actor, SeatAction::Kick { index });
    assert_eq!(run(&state, kick("m2", 1)), Err(DomainError::Forbidden { needs: "admin" }));
    assert_eq!(run(&state, kick("adm", 0)), Err(DomainError::Forbidden { needs: "service" }));
    // An admin muting the owner's seat is refused whatever the seat's state.
    let muted_owner = run(&state, seat("owner", SeatAction::Mute { index: 0, muted: true })).unwrap().state;
    let again = run(&muted_owner, seat("adm", SeatAction::Mute { index: 0, muted: true }));
    assert_eq!(again, Err(DomainError::Forbidden { needs: "service" }));
    // Its own seat is anyone's with the role to kick, lock or mute: the owner's too.
    assert!(run(&state, seat("owner", SeatAction::Mute { index: 0, muted: true })).is_ok());
    assert!(run(&state, kick("owner", 0)).is_ok());
    assert_eq!(run(&state, kick("adm", 2)), Err(DomainError::SeatEmpty { index: 2 }));
    let kicked = run(&state, kick("adm", 1)).unwrap();
    assert_eq!(holders(&kicked.state), [Some("owner"), None, None]);
    assert_eq!(only_event(&kicked).payload["cause"]["user_id"], "m1");
    // Locking an occupied seat frees it; a locked seat cannot be taken.
    let lock = |index, locked| seat("adm", SeatAction::Lock { index, locked });
    let locked = run(&state, lock(1, true)).unwrap();
    assert_eq!(holders(&locked.state), [Some("owner"), None, None]);
    assert!(locked.state.seats[1].locked);
    assert_eq!(run(&locked.state, take("m2", Some(1))), Err(DomainError::SeatLocked { index: 1 }));
    assert!(!run(&locked.state, lock(1, true)).unwrap().applied, "locking a locked seat is a no-op");
    let muted = run(&state, seat("adm", SeatAction::Mute { index: 1, muted: true })).unwrap();
    assert!(muted.state.seats[1].muted);
    assert_eq!(only_event(&muted).payload["cause"]["muted"], true);
}

#[test]
fn move_cancels_forces_or_swaps_and_a_member_only_moves_itself_politely() {
    let state = room(3, SeatMode::Free);
    let state = run(&state, take("m1", Some(0))).unwrap().state;
    let state = run(&state, take("m2", Some(1))).unwrap().state;
    let mv =
        |actor: &str, who: &str, to, policy| seat(actor, SeatAction::Move { user_id: user(who), to, policy });
    let moved = run(&state, mv("m1", "m1", 2, MovePolicy::Cancel)).unwrap();
    assert_eq!(holders(&moved.state), [None, Some("m2"), Some("m1")]);
    assert_eq!(only_event(&moved).payload["cause"]["from"], 0);
    assert_eq!(
        run(&state, mv("m1", "m1", 1, MovePolicy::Cancel)),
        Err(DomainError::SeatOccupied { index: 1 })
    );
    assert_eq!(
        run(&state, mv("m1", "m1", 1, MovePolicy::Force)),
        Err(DomainError::Forbidden { needs: "admin" })
    );
    assert_eq!(
        run(&state, mv("m1", "m2", 2, MovePolicy::Cancel)),
        Err(DomainError::Forbidden { needs: "admin" })
    );
    assert_eq!(
        run(&state, mv("adm", "m3", 2, MovePolicy::Cancel)),
        Err(DomainError::NotSeated { user_id: "m3".into() })
    );
    let forced = run(&state, mv("adm", "m1", 1, MovePolicy::Force)).unwrap();
    assert_eq!(holders(&forced.state), [None, Some("m1"), None]);
    assert_eq!(only_event(&forced).payload["cause"]["displaced"], "m2");
    let swapped = run(&state, mv("adm", "m1", 1, MovePolicy::Swap)).unwrap();
    assert_eq!(holders(&swapped.state), [Some("m2"), Some("m1"), None]);
    // In apply mode a member does not move itself.
    let info = InfoChange { seat_mode: Some(SeatMode::Apply), ..InfoChange::default() };
    let apply = run(&state, Command::UpdateRoomInfo { by: by("owner"), info }).unwrap().state;
    assert_eq!(
        run(&apply, mv("m1", "m1", 2, MovePolicy::Cancel)),
        Err(DomainError::Forbidden { needs: "admin" })
    );
}

#[test]
fn a_member_leaving_evicted_or_kicked_leaves_its_seat_in_the_same_command() {
    let state = room(2, SeatMode::Free);
    let state = run(&state, take("m1", Some(0))).unwrap().state;
    let state =
        run(&state, seat("adm", SeatAction::Invite { user_id: user("m2"), index: None })).unwrap().state;
    for reason in [LeaveReason::User, LeaveReason::Stale] {
        let left = run(&state, Command::LeaveRoom { user_id: user("m1"), reason }).unwrap();
        let event = only_event(&left);
        assert_eq!(event.event_type, EventType::RoomUserLeft);
        assert_eq!(event.payload["seats"][0]["user_id"], serde_json::Value::Null);
        assert_eq!(holders(&left.state), [None, None]);
        assert_eq!(left.state.version, state.version + 1);
    }
    let kick = Command::KickUser { by: by("adm"), user_id: user("m1"), ban_s: 60, reason: String::new() };
    let kicked = run(&state, kick).unwrap();
    assert_eq!(only_event(&kicked).payload["seats"], json!(kicked.state.seats.iter().collect::<Vec<_>>()));
    // A member without a seat leaves without one in its event, dropping its invitation.
    let left = run(&state, Command::LeaveRoom { user_id: user("m2"), reason: LeaveReason::User }).unwrap();
    assert!(only_event(&left).payload.get("seats").is_none());
    assert!(left.state.seat_pending.is_empty());
    // The close leaves every seat.
    let closed = run(&state, Command::CloseRoom { by: Some(by("owner")), idle: false }).unwrap().state;
    assert_eq!(holders(&closed), [None, None]);
    assert!(closed.seat_pending.is_empty());
}

#[test]
fn a_request_expires_once_when_due_and_only_the_one_pending() {
    let state = room(1, SeatMode::Apply);
    let state = run(&state, seat("m1", SeatAction::Request { index: Some(0) })).unwrap().state;
    let due = 1_000 + TTL;
    let expire = |expires_at_ms| Command::ExpireSeatRequest {
        user_id: user("m1"),
        kind: PendingKind::Request,
        expires_at_ms,
    };
    // Not due yet (a clock stepped back since the scan): refused, so never logged as a no-op.
    assert!(matches!(
        run_at(&state, expire(due), due - 1),
        Err(DomainError::InvalidArgument { field: "expires_at_ms", .. })
    ));
    assert!(!run_at(&state, expire(due + 1), due + 5).unwrap().applied, "another request's expiry");
    // Once due it can no longer be accepted, though its expiry has not run yet.
    let late = seat("adm", SeatAction::AnswerRequest { user_id: user("m1"), accept: true });
    let refused = run_at(&state, late, due);
    assert_eq!(refused, Err(DomainError::NoSuchRequest { user_id: "m1".into(), kind: "request" }));
    // Turning it down still works (an operator clears it so).
    let reject = seat("adm", SeatAction::AnswerRequest { user_id: user("m1"), accept: false });
    assert!(run_at(&state, reject, due).unwrap().applied);
    let expired = run_at(&state, expire(due), due).unwrap();
    let event = only_event(&expired);
    assert_eq!(event.event_type, EventType::RoomSeatRequestExpired);
    assert_eq!(event.payload, json!({"user_id": "m1", "kind": "request", "index": 0}));
    assert!(!run_at(&expired.state, expire(due), due).unwrap().applied, "expired twice");
    // The user may ask again.
    assert!(run_at(&expired.state, seat("m1", SeatAction::Request { index: None }), due).is_ok());
}
