//! Property tests of roles and moderation (SPEC §14.2): arbitrary sequences of joins, leaves,
//! appointments, mutes, kicks with bans, unbans and closes, by any actor, while the room's clock
//! runs on — checked step by step against the rules written from the spec, not from the code:
//!
//! - a command by an actor below the role it needs is refused, naming that role, and changes
//!   nothing; nobody but a service moderates the owner, an admin no other admin;
//! - nobody is a member while a ban holds them; a kicked user is a member no more;
//! - the owner is never an admin; there are never more than `max_admins` admins.

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::select;

use super::{Command, CommandContext, CommandId, DomainError, RoomId, RoomState, RoomStatus, UserId, apply};
use crate::domain::{Actor, Role};

/// Actors and targets: the owner, a few users, a service.
static PEOPLE: [&str; 6] = ["owner", "ann", "bob", "cy", "dee", "svc:ops"];
const MAX_ADMINS: usize = 2;

/// One step: an actor's command, then the clock moving on `advance_s` seconds.
#[derive(Debug, Clone)]
enum Op {
    Join(usize),
    Leave(usize),
    Appoint { actor: usize, user: usize, admin: bool },
    Mute { actor: usize, user: usize, secs: u32 },
    Kick { actor: usize, user: usize, ban_s: u32 },
    Unban { actor: usize, user: usize },
    Close { actor: usize },
}

fn op() -> impl Strategy<Value = (Op, u32)> {
    let who = || 0..PEOPLE.len();
    let user = || 0..PEOPLE.len() - 1;
    let op = prop_oneof![
        6 => user().prop_map(Op::Join),
        2 => user().prop_map(Op::Leave),
        3 => (who(), user(), any::<bool>()).prop_map(|(actor, user, admin)| Op::Appoint { actor, user, admin }),
        3 => (who(), user(), select(vec![0u32, 1, 5, 60])).prop_map(|(actor, user, secs)| Op::Mute { actor, user, secs }),
        4 => (who(), user(), select(vec![0u32, 1, 3, 30])).prop_map(|(actor, user, ban_s)| Op::Kick { actor, user, ban_s }),
        2 => (who(), user()).prop_map(|(actor, user)| Op::Unban { actor, user }),
        1 => who().prop_map(|actor| Op::Close { actor }),
    ];
    (op, select(vec![0u32, 0, 1, 2]))
}

fn actor(i: usize) -> Actor {
    Actor::try_from(PEOPLE[i].to_owned()).expect("a valid actor")
}

fn user(i: usize) -> UserId {
    UserId::parse(PEOPLE[i]).expect("a user")
}

fn command(op: &Op) -> Command {
    match *op {
        Op::Join(u) => Command::JoinRoom { user_id: user(u) },
        Op::Leave(u) => Command::LeaveRoom { user_id: user(u), reason: crate::domain::LeaveReason::User },
        Op::Appoint { actor: a, user: u, admin } => {
            Command::SetAdmin { by: actor(a), user_id: user(u), admin }
        }
        Op::Mute { actor: a, user: u, secs } => {
            Command::MuteUser { by: actor(a), user_id: user(u), duration_s: secs }
        }
        Op::Kick { actor: a, user: u, ban_s } => {
            Command::KickUser { by: actor(a), user_id: user(u), ban_s, reason: "r".into() }
        }
        Op::Unban { actor: a, user: u } => Command::UnbanUser { by: actor(a), user_id: user(u) },
        Op::Close { actor: a } => Command::CloseRoom { by: Some(actor(a)), idle: false },
    }
}

/// The role an op needs of its actor, and its target, when it has them (the spec's matrix).
fn needs(op: &Op) -> Option<(usize, Role, Option<usize>)> {
    match *op {
        Op::Join(_) | Op::Leave(_) => None,
        Op::Appoint { actor, .. } | Op::Close { actor } => Some((actor, Role::Owner, None)),
        Op::Mute { actor, user, .. } | Op::Kick { actor, user, .. } | Op::Unban { actor, user } => {
            Some((actor, Role::Admin, Some(user)))
        }
    }
}

/// The role of person `i` in `room`.
fn role(room: &RoomState, i: usize) -> Role {
    match actor(i) {
        Actor::Service(_) => Role::Service,
        Actor::User(u) if u == room.owner_id => Role::Owner,
        Actor::User(u) if room.admins.contains(&u) => Role::Admin,
        Actor::User(_) => Role::Member,
    }
}

/// Whether the matrix lets actor `a` do `op` (its own self aside, which may moderate itself
/// unless it is the owner).
fn allowed(room: &RoomState, op: &Op) -> bool {
    let Some((a, needed, target)) = needs(op) else { return true };
    let mine = role(room, a);
    if mine < needed {
        return false;
    }
    match target {
        None => true,
        Some(t) if t == a && PEOPLE[t] != "owner" => true,
        Some(t) => mine > role(room, t),
    }
}

fn ctx(now_ms: i64) -> CommandContext {
    CommandContext {
        room_id: RoomId::parse("room").unwrap(),
        command_id: CommandId::parse("c").unwrap(),
        request_id: "req".into(),
        now_ms,
        max_admins: MAX_ADMINS,
        seat_request_ttl_ms: crate::domain::DEFAULT_SEAT_REQUEST_TTL_MS,
        idle_close_after_ms: None,
    }
}

fn check_invariants(room: &RoomState, now_ms: i64) -> Result<(), TestCaseError> {
    for member in room.members.keys() {
        prop_assert!(room.ban_of(member, now_ms).is_none(), "{member} is a member while banned");
    }
    prop_assert!(!room.admins.contains(&room.owner_id), "the owner is an admin");
    prop_assert!(room.admins.len() <= MAX_ADMINS, "{} admins", room.admins.len());
    Ok(())
}

fn run(ops: &[(Op, u32)]) -> Result<(), TestCaseError> {
    let create = Command::CreateRoom { owner_id: user(0), title: "Live".into(), seats: Default::default() };
    let mut now_ms = 1_000;
    let mut room = apply(None, &create, &ctx(now_ms)).unwrap().state;
    for (op, advance_s) in ops {
        now_ms += i64::from(*advance_s) * 1000;
        let command = command(op);
        let result = apply(Some(&room), &command, &ctx(now_ms));
        let may = allowed(&room, op);
        match &result {
            Err(DomainError::Forbidden { needs }) => {
                prop_assert!(!may, "{op:?} refused ({needs}) though the matrix allows it");
            }
            _ if room.status == RoomStatus::Closed => {
                prop_assert_eq!(&result, &Err(DomainError::RoomClosed), "{:?} on a closed room", op);
            }
            _ => prop_assert!(may, "{op:?} by {:?} went through the matrix: {result:?}", needs(op)),
        }
        if let Ok(applied) = result {
            if let (Op::Kick { user: u, .. }, true) = (op, applied.applied) {
                prop_assert!(!applied.state.members.contains_key(&user(*u)), "kicked, still a member");
            }
            room = applied.state;
        }
        check_invariants(&room, now_ms)?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Every step keeps the role matrix, and no banned user is ever a member.
    #[test]
    fn moderation_keeps_the_matrix_and_no_banned_user_is_a_member(ops in vec(op(), 1..80)) {
        run(&ops)?;
    }
}
