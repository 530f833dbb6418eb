//! Property tests of mic seats (SPEC §14.3): arbitrary sequences of joins, leaves, stale
//! evictions, kicks, takes, seat leaves, seat kicks, locks, moves, requests, invitations and
//! their answers, mode changes and expiries, by any actor, while the clock runs — checked step
//! by step against the rules written from the spec:
//!
//! - no seat is held by a non-member, nobody holds two seats, a locked seat is empty;
//! - a pending request or invitation belongs to a member without a seat, one per user, at most
//!   [`MAX_PENDING_SEATS`] per room, and none is pending in free mode... unless invited;
//! - every applied command makes exactly one event that reaches IM, and whenever the seats
//!   changed, that event carries the whole new seat list (so the events rebuild the seats);
//! - the role matrix: what only the owner and admins do (answer, invite, kick, lock, mute, a
//!   take in apply mode, moving someone or forcing and swapping) is never applied for a member,
//!   and nobody but a service acts on someone of its rank or above (the owner, another admin)
//!   other than itself.

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::select;

use super::{Command, CommandContext, CommandId, RoomId, RoomState, UserId, apply};
use crate::domain::{
    Actor, EventType, LeaveReason, MAX_PENDING_SEATS, MovePolicy, PendingKind, Role, SeatAction, SeatConfig,
    SeatMode,
};

/// The owner, a few users, a service.
static PEOPLE: [&str; 7] = ["owner", "ann", "bob", "cy", "dee", "eve", "svc:ops"];
const SEATS: u32 = 3;
const TTL_MS: i64 = 5_000;

#[derive(Debug, Clone)]
enum Op {
    Join(usize),
    Leave { user: usize, stale: bool },
    Kick { actor: usize, user: usize },
    Appoint(usize),
    Seat { actor: usize, action: SeatAction },
    Mode { actor: usize, apply: bool },
    Expire { user: usize, kind: PendingKind },
}

fn op() -> impl Strategy<Value = (Op, u32)> {
    let who = || 0..PEOPLE.len();
    let user = || 0..PEOPLE.len() - 1;
    let index = || prop_oneof![Just(None), (0..SEATS + 1).prop_map(Some)];
    let seat = prop_oneof![
        4 => index().prop_map(|index| SeatAction::Take { index }),
        2 => Just(SeatAction::Leave),
        3 => index().prop_map(|index| SeatAction::Request { index }),
        1 => prop::option::of(user()).prop_map(|u| SeatAction::CancelRequest { user_id: u.map(person) }),
        3 => (user(), any::<bool>()).prop_map(|(u, accept)| SeatAction::AnswerRequest { user_id: person(u), accept }),
        2 => (user(), index()).prop_map(|(u, index)| SeatAction::Invite { user_id: person(u), index }),
        2 => any::<bool>().prop_map(|accept| SeatAction::AnswerInvite { accept }),
        2 => (0..SEATS).prop_map(|index| SeatAction::Kick { index }),
        2 => (0..SEATS, any::<bool>()).prop_map(|(index, locked)| SeatAction::Lock { index, locked }),
        1 => (0..SEATS, any::<bool>()).prop_map(|(index, muted)| SeatAction::Mute { index, muted }),
        3 => (user(), 0..SEATS, select(vec![MovePolicy::Cancel, MovePolicy::Force, MovePolicy::Swap]))
            .prop_map(|(u, to, policy)| SeatAction::Move { user_id: person(u), to, policy }),
    ];
    let op = prop_oneof![
        6 => user().prop_map(Op::Join),
        2 => (user(), any::<bool>()).prop_map(|(user, stale)| Op::Leave { user, stale }),
        1 => (who(), user()).prop_map(|(actor, user)| Op::Kick { actor, user }),
        1 => (1..PEOPLE.len() - 1).prop_map(Op::Appoint),
        14 => (who(), seat).prop_map(|(actor, action)| Op::Seat { actor, action }),
        1 => (who(), any::<bool>()).prop_map(|(actor, apply)| Op::Mode { actor, apply }),
        2 => (user(), select(vec![PendingKind::Request, PendingKind::Invite])).prop_map(|(user, kind)| Op::Expire { user, kind }),
    ];
    (op, select(vec![0u32, 0, 1, 3]))
}

fn person(i: usize) -> UserId {
    UserId::parse(PEOPLE[i]).expect("a user")
}

fn actor(i: usize) -> Actor {
    Actor::try_from(PEOPLE[i].to_owned()).expect("a valid actor")
}

fn command(room: &RoomState, op: &Op) -> Command {
    match op {
        Op::Join(u) => Command::JoinRoom { user_id: person(*u) },
        Op::Leave { user, stale } => {
            let reason = if *stale { LeaveReason::Stale } else { LeaveReason::User };
            Command::LeaveRoom { user_id: person(*user), reason }
        }
        Op::Kick { actor: a, user } => {
            Command::KickUser { by: actor(*a), user_id: person(*user), ban_s: 1, reason: String::new() }
        }
        Op::Appoint(u) => Command::SetAdmin { by: actor(0), user_id: person(*u), admin: true },
        Op::Seat { actor: a, action } => Command::Seat { by: actor(*a), action: action.clone() },
        Op::Mode { actor: a, apply } => {
            let seat_mode = Some(if *apply { SeatMode::Apply } else { SeatMode::Free });
            let info = crate::domain::InfoChange { seat_mode, ..Default::default() };
            Command::UpdateRoomInfo { by: actor(*a), info }
        }
        Op::Expire { user, kind } => {
            // The expiry the timer would send for what is pending now (or a stale one).
            let expires_at_ms = room.seat_pending.get(&person(*user)).map_or(0, |p| p.expires_at_ms);
            Command::ExpireSeatRequest { user_id: person(*user), kind: *kind, expires_at_ms }
        }
    }
}

fn ctx(now_ms: i64) -> CommandContext {
    CommandContext {
        room_id: RoomId::parse("room").unwrap(),
        command_id: CommandId::parse("c").unwrap(),
        request_id: "req".into(),
        now_ms,
        max_admins: 2,
        seat_request_ttl_ms: TTL_MS,
        idle_close_after_ms: None,
    }
}

/// The rank person `i` acts with in `room` at `now_ms`: its role, a member's while banned.
fn role(room: &RoomState, i: usize, now_ms: i64) -> Role {
    match actor(i) {
        Actor::Service(_) => Role::Service,
        Actor::User(u) if room.bans.get(&u).is_some_and(|b| now_ms < b.until_ms) => Role::Member,
        Actor::User(u) => room.user_role(&u),
    }
}

/// The rights the matrix asks of an applied seat action by `a` in `before` (restated from the
/// spec): `Ok` when it may, else why not.
fn check_rights(before: &RoomState, a: usize, action: &SeatAction, now_ms: i64) -> Result<(), TestCaseError> {
    let mine = role(before, a, now_ms);
    let me = match actor(a) {
        Actor::User(u) => Some(u),
        Actor::Service(_) => None,
    };
    // A moderator acting on `user` (not itself) must outrank it.
    let over = |user: &UserId| me.as_ref() == Some(user) || mine > before.user_role(user);
    let holder = |index: u32| before.seats.get(index as usize).and_then(|s| s.user_id.clone());
    let apply_mode = before.seat_mode == SeatMode::Apply;
    let (admin_only, targets): (bool, Vec<UserId>) = match action {
        SeatAction::Take { .. } => (apply_mode, vec![]),
        SeatAction::Leave | SeatAction::Request { .. } | SeatAction::AnswerInvite { .. } => (false, vec![]),
        SeatAction::CancelRequest { user_id } => {
            let other = user_id.clone().filter(|u| me.as_ref() != Some(u));
            (other.is_some(), other.into_iter().collect())
        }
        SeatAction::AnswerRequest { user_id, accept } => {
            (true, if *accept { vec![] } else { vec![user_id.clone()] })
        }
        SeatAction::Invite { .. } => (true, vec![]),
        SeatAction::Kick { index } | SeatAction::Lock { index, .. } | SeatAction::Mute { index, .. } => {
            (true, holder(*index).into_iter().collect())
        }
        SeatAction::Move { user_id, to, policy } => {
            let itself = me.as_ref() == Some(user_id);
            let mut targets = if itself { vec![] } else { vec![user_id.clone()] };
            if *policy != MovePolicy::Cancel {
                targets.extend(holder(*to));
            }
            (!itself || apply_mode || *policy != MovePolicy::Cancel, targets)
        }
    };
    prop_assert!(!admin_only || mine >= Role::Admin, "{action:?} applied for a {mine:?}");
    for target in &targets {
        prop_assert!(
            over(target),
            "{action:?} by a {mine:?} applied on {target} ({:?})",
            before.user_role(target)
        );
    }
    Ok(())
}

fn check_invariants(room: &RoomState) -> Result<(), TestCaseError> {
    let mut seated = Vec::new();
    for seat in &room.seats {
        if let Some(user) = &seat.user_id {
            prop_assert!(
                room.members.contains_key(user),
                "{user} holds seat {} but is no member",
                seat.index
            );
            prop_assert!(!seated.contains(user), "{user} holds two seats");
            prop_assert!(!seat.locked, "locked seat {} is held", seat.index);
            seated.push(user.clone());
        }
    }
    prop_assert_eq!(room.seats.len() as u32, SEATS);
    prop_assert!(room.seat_pending.len() <= MAX_PENDING_SEATS);
    for (user, pending) in &room.seat_pending {
        prop_assert!(room.members.contains_key(user), "{user}'s {:?} is pending but they left", pending.kind);
        prop_assert!(!seated.contains(user), "{user} is seated with a {:?} pending", pending.kind);
        if pending.kind == PendingKind::Request {
            prop_assert_eq!(room.seat_mode, SeatMode::Apply, "a request pending in free mode");
        }
    }
    Ok(())
}

/// One IM event per applied command; when the seats changed, it carries them.
fn check_events(
    before: &RoomState,
    after: &RoomState,
    events: &[crate::domain::Event],
) -> Result<(), TestCaseError> {
    let im: Vec<_> = events.iter().filter(|e| e.event_type.reaches_im()).collect();
    prop_assert_eq!(im.len(), 1, "{:?}", events);
    let seats: Vec<_> = after.seats.iter().cloned().collect();
    let carried =
        im[0].payload.get("seats").map(|s| serde_json::from_value::<Vec<crate::domain::Seat>>(s.clone()));
    if im[0].event_type == EventType::RoomSeatsChanged {
        prop_assert!(carried.is_some(), "RoomSeatsChanged without its seats");
    }
    if before.seats != after.seats && after.status == crate::domain::RoomStatus::Open {
        match carried {
            Some(Ok(list)) => prop_assert_eq!(list, seats, "the event's seats are not the room's"),
            other => prop_assert!(false, "seats changed but {:?} carries {:?}", im[0].event_type, other),
        }
    } else if let Some(list) = carried {
        prop_assert_eq!(list.ok(), Some(seats), "the event's seats are not the room's");
    }
    Ok(())
}

fn run(mode: SeatMode, ops: &[(Op, u32)]) -> Result<(), TestCaseError> {
    let create = Command::CreateRoom {
        owner_id: person(0),
        title: "Voice".into(),
        seats: SeatConfig { count: SEATS, mode },
    };
    let mut now_ms = 1_000;
    let mut room = apply(None, &create, &ctx(now_ms)).unwrap().state;
    for (op, advance_s) in ops {
        now_ms += i64::from(*advance_s) * 1000;
        let command = command(&room, op);
        if let Ok(applied) = apply(Some(&room), &command, &ctx(now_ms)) {
            if applied.applied {
                if let Op::Seat { actor: a, action } = op {
                    check_rights(&room, *a, action, now_ms)?;
                }
                check_events(&room, &applied.state, &applied.events)?;
            } else {
                prop_assert_eq!(&applied.state, &room, "a no-op changed the room");
            }
            room = applied.state;
        }
        check_invariants(&room)?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// After any interleaving of seat, membership and moderation commands, no seat is held by
    /// a non-member, nobody holds two, and the events tell every change of the seats.
    #[test]
    fn seats_are_held_by_members_only_once_each(
        apply_mode in any::<bool>(),
        ops in vec(op(), 1..120),
    ) {
        run(if apply_mode { SeatMode::Apply } else { SeatMode::Free }, &ops)?;
    }
}
