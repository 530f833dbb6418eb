//! Property tests of roles and moderation (SPEC §14.2): arbitrary sequences of joins, leaves,
//! appointments, mutes, kicks with bans, unbans and closes, by any actor, while the room's clock
//! runs on — checked step by step against the rules written from the spec, not from the code:
//!
//! - a command by an actor below the role it needs is refused, naming that role, and changes
//!   nothing; nobody but a service moderates the owner, an admin no other admin;
//! - nobody is a member while a ban holds them; a kicked user is a member no more;
//! - a banned actor acts as a member: a banned admin (or owner) moderates nothing while banned;
//! - a mute or ban in force is lifted, or cut short, only by a service, a rank above its
//!   setter's, or its setter on someone else: nobody lifts its own unless it outranks the
//!   setter; a sanction extended by a rank that may not lift it stays its setter's;
//! - the owner is never an admin; there are never more than `max_admins` admins.

use std::collections::BTreeMap;

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
        // On itself, often: the lifts nobody may do below its setter.
        3 => (user(), select(vec![0u32, 0, 1, 60])).prop_map(|(me, secs)| Op::Mute { actor: me, user: me, secs }),
        1 => (user(), select(vec![1u32, 30])).prop_map(|(me, ban_s)| Op::Kick { actor: me, user: me, ban_s }),
        2 => user().prop_map(|me| Op::Unban { actor: me, user: me }),
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

/// The role of person `i` in `room` (as a target or a setter: a ban does not change it).
fn role(room: &RoomState, i: usize) -> Role {
    match actor(i) {
        Actor::Service(_) => Role::Service,
        Actor::User(u) if u == room.owner_id => Role::Owner,
        Actor::User(u) if room.admins.contains(&u) => Role::Admin,
        Actor::User(_) => Role::Member,
    }
}

/// The rank person `i` acts with at `now_ms`: its role, a member's while a ban holds it.
fn rank(room: &RoomState, model: &Sanctions, i: usize, now_ms: i64) -> Role {
    if model.holding(Kind::Ban, i, now_ms).is_some() { Role::Member } else { role(room, i) }
}

/// A mute or a ban, as the model keeps them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Mute,
    Ban,
}

/// The sanctions the model expects, by kind and person: until when, and who set them (whose
/// rank decides who lifts them).
#[derive(Debug, Default)]
struct Sanctions(BTreeMap<(Kind, usize), (i64, usize)>);

impl Sanctions {
    /// Person `i`'s sanction of `kind` in force at `now_ms`: `(until_ms, setter)`.
    fn holding(&self, kind: Kind, i: usize, now_ms: i64) -> Option<(i64, usize)> {
        self.0.get(&(kind, i)).copied().filter(|(until, _)| now_ms < *until)
    }
}

/// What an op does to a sanction: lifts it, or sets one until a time.
fn sanction_of(op: &Op, now_ms: i64) -> Option<(Kind, usize, Option<i64>)> {
    let until = |secs: u32| now_ms + i64::from(secs) * 1000;
    match *op {
        Op::Mute { user, secs: 0, .. } => Some((Kind::Mute, user, None)),
        Op::Mute { user, secs, .. } => Some((Kind::Mute, user, Some(until(secs)))),
        Op::Kick { ban_s: 0, .. } => None,
        Op::Kick { user, ban_s, .. } => Some((Kind::Ban, user, Some(until(ban_s)))),
        Op::Unban { user, .. } => Some((Kind::Ban, user, None)),
        Op::Join(_) | Op::Leave(_) | Op::Appoint { .. } | Op::Close { .. } => None,
    }
}

/// Whether actor `a` may lift `t`'s sanction set by `setter`: a service, a rank above the
/// setter's, or the setter itself on someone else — never anyone on itself below its setter.
fn may_lift(room: &RoomState, model: &Sanctions, a: usize, t: usize, setter: usize, now_ms: i64) -> bool {
    let mine = rank(room, model, a, now_ms);
    mine == Role::Service || mine > role(room, setter) || (setter == a && t != a)
}

/// Whether an op is a lift (or cuts a sanction short) of a sanction in force: `(target, setter)`.
fn lifting(model: &Sanctions, op: &Op, now_ms: i64) -> Option<(usize, usize)> {
    let (kind, t, until) = sanction_of(op, now_ms)?;
    let (held_until, setter) = model.holding(kind, t, now_ms)?;
    until.is_none_or(|until| until < held_until).then_some((t, setter))
}

/// Whether the matrix lets actor `a` do `op` at `now_ms` (its own self aside, which may
/// moderate itself unless it is the owner; a banned actor ranks as a member).
fn allowed(room: &RoomState, model: &Sanctions, op: &Op, now_ms: i64) -> bool {
    let Some((a, needed, target)) = needs(op) else { return true };
    let mine = rank(room, model, a, now_ms);
    if mine < needed {
        return false;
    }
    let over = match target {
        None => true,
        Some(t) if t == a && PEOPLE[t] != "owner" => true,
        Some(t) => mine > role(room, t),
    };
    over && lifting(model, op, now_ms).is_none_or(|(t, setter)| may_lift(room, model, a, t, setter, now_ms))
}

/// The model after `op` applied: a lift removes the sanction; a new one is the actor's, unless
/// it may not lift the one in force (then it extends it, still its setter's).
fn update(model: &mut Sanctions, room: &RoomState, op: &Op, now_ms: i64) {
    let (Some((kind, t, until)), Some((a, _, _))) = (sanction_of(op, now_ms), needs(op)) else { return };
    let Some(until) = until else {
        model.0.remove(&(kind, t));
        return;
    };
    let setter = match model.holding(kind, t, now_ms) {
        Some((_, setter)) if !may_lift(room, model, a, t, setter, now_ms) => setter,
        Some(_) | None => a,
    };
    model.0.insert((kind, t), (until, setter));
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

fn check_invariants(room: &RoomState, model: &Sanctions, now_ms: i64) -> Result<(), TestCaseError> {
    for member in room.members.keys() {
        prop_assert!(room.ban_of(member, now_ms).is_none(), "{member} is a member while banned");
    }
    // Every person but the service (the last): a service is never sanctioned.
    for (i, name) in PEOPLE.iter().enumerate().take(PEOPLE.len() - 1) {
        for (kind, held) in [(Kind::Mute, &room.mutes), (Kind::Ban, &room.bans)] {
            let got = held.get(&user(i)).filter(|r| r.holds_at(now_ms)).map(|r| (r.until_ms, r.by.as_str()));
            let want = model.holding(kind, i, now_ms).map(|(until, setter)| (until, PEOPLE[setter]));
            prop_assert_eq!(got, want, "{}'s {:?}: (until, set by)", name, kind);
        }
    }
    prop_assert!(!room.admins.contains(&room.owner_id), "the owner is an admin");
    prop_assert!(room.admins.len() <= MAX_ADMINS, "{} admins", room.admins.len());
    Ok(())
}

fn run(ops: &[(Op, u32)]) -> Result<(), TestCaseError> {
    let create = Command::CreateRoom { owner_id: user(0), title: "Live".into(), seats: Default::default() };
    let mut now_ms = 1_000;
    let mut room = apply(None, &create, &ctx(now_ms)).unwrap().state;
    let mut model = Sanctions::default();
    for (op, advance_s) in ops {
        now_ms += i64::from(*advance_s) * 1000;
        let command = command(op);
        let result = apply(Some(&room), &command, &ctx(now_ms));
        let may = allowed(&room, &model, op, now_ms);
        let banned_moderator = needs(op).is_some_and(|(a, needed, _)| {
            model.holding(Kind::Ban, a, now_ms).is_some() && role(&room, a) >= needed
        });
        match &result {
            Err(
                refusal @ (DomainError::Forbidden { .. }
                | DomainError::SuspendedByBan { .. }
                | DomainError::LiftForbidden { .. }),
            ) => {
                prop_assert!(!may, "{op:?} refused ({refusal}) though the matrix allows it");
                if let DomainError::SuspendedByBan { .. } = refusal {
                    prop_assert!(banned_moderator, "{op:?}: {refusal} but not banned");
                }
                if let DomainError::LiftForbidden { .. } = refusal {
                    prop_assert!(lifting(&model, op, now_ms).is_some(), "{op:?}: {refusal} lifts nothing");
                }
            }
            _ if room.status == RoomStatus::Closed => {
                prop_assert_eq!(&result, &Err(DomainError::RoomClosed), "{:?} on a closed room", op);
            }
            _ => prop_assert!(may, "{op:?} by {:?} went through the matrix: {result:?}", needs(op)),
        }
        if let Ok(applied) = &result {
            // Said once more as the issue states them: a banned moderator's command never goes
            // through, and nobody lifts its own sanction unless it outranks who set it.
            prop_assert!(!banned_moderator, "{op:?} by a banned moderator applied");
            if let (Some((a, _, _)), Some((t, setter))) = (needs(op), lifting(&model, op, now_ms))
                && a == t
            {
                let (mine, theirs) = (rank(&room, &model, a, now_ms), role(&room, setter));
                prop_assert!(mine > theirs, "{op:?}: a {mine:?} lifted its own sanction set by a {theirs:?}");
            }
            if let (Op::Kick { user: u, .. }, true) = (op, applied.applied) {
                prop_assert!(!applied.state.members.contains_key(&user(*u)), "kicked, still a member");
            }
            update(&mut model, &room, op, now_ms);
            room = applied.state.clone();
        }
        check_invariants(&room, &model, now_ms)?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Every step keeps the role matrix and the lift rights (a sanction lifted only by a rank
    /// above its setter's; a banned moderator refused), and no banned user is ever a member.
    #[test]
    fn moderation_keeps_the_matrix_and_no_banned_user_is_a_member(ops in vec(op(), 1..80)) {
        run(&ops)?;
    }
}
