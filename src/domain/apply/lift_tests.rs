//! Who lifts a mute or a ban, and a banned moderator (docs/API.md, "Roles and who acts"): a
//! sanction is lifted only by a rank above its setter's, a service, or its setter on someone
//! else; a banned admin moderates nothing while banned.

use super::*;
use crate::domain::seat::{SeatAction, SeatConfig, SeatMode};

/// `room()` with a second admin, `adm2`.
fn two_admins() -> RoomState {
    let appoint = Command::SetAdmin { by: by("owner"), user_id: user("adm2"), admin: true };
    run(&room(), appoint).unwrap().state
}

fn service() -> Actor {
    Actor::Service("ops".into())
}

fn mute_for(actor: Actor, target: &str, duration_s: u32) -> Command {
    Command::MuteUser { by: actor, user_id: user(target), duration_s }
}

fn ban(actor: Actor, target: &str, ban_s: u32) -> Command {
    Command::KickUser { by: actor, user_id: user(target), ban_s, reason: String::new() }
}

fn unban(actor: Actor, target: &str) -> Command {
    Command::UnbanUser { by: actor, user_id: user(target) }
}

fn lift_refused(kind: &'static str, setter: &'static str, needs: &'static str) -> Result<(), DomainError> {
    Err(DomainError::LiftForbidden { kind, setter, needs })
}

/// Ok when `command` applies to `state`, else its refusal; a refusal changes nothing.
fn outcome(state: &RoomState, command: Command) -> Result<(), DomainError> {
    run(state, command).map(|applied| assert!(applied.applied, "applied"))
}

#[test]
fn a_mute_is_lifted_only_by_a_rank_above_its_setter_or_by_its_setter_on_someone_else() {
    let room = two_admins();
    // (setter, target, lifter, outcome)
    let cases = [
        ("owner", "adm", by("adm"), lift_refused("mute", "owner", "service")),
        ("owner", "adm", by("owner"), Ok(())),
        ("owner", "adm", service(), Ok(())),
        ("adm", "adm", by("adm"), lift_refused("mute", "admin", "owner")),
        ("adm", "adm", by("owner"), Ok(())),
        ("owner", "m1", by("adm"), lift_refused("mute", "owner", "service")),
        ("adm", "m1", by("adm"), Ok(())),
        ("adm", "m1", by("adm2"), lift_refused("mute", "admin", "owner")),
        ("adm", "m1", by("owner"), Ok(())),
    ];
    for (setter, target, lifter, want) in cases {
        let muted = run(&room, mute_for(by(setter), target, 60)).unwrap().state;
        let got = outcome(&muted, mute_for(lifter.clone(), target, 0));
        assert_eq!(got, want, "{target}'s mute by {setter}, lifted by {lifter:?}");
    }
    let by_ops = run(&room, mute_for(service(), "adm", 60)).unwrap().state;
    assert_eq!(outcome(&by_ops, mute_for(by("owner"), "adm", 0)), lift_refused("mute", "service", "service"));
    assert_eq!(outcome(&by_ops, mute_for(service(), "adm", 0)), Ok(()));
}

#[test]
fn a_setter_no_longer_admin_ranks_as_the_member_it_is() {
    let muted = run(&two_admins(), mute_for(by("adm"), "m1", 60)).unwrap().state;
    let demote = Command::SetAdmin { by: by("owner"), user_id: user("adm"), admin: false };
    let demoted = run(&muted, demote).unwrap().state;
    assert_eq!(outcome(&demoted, mute_for(by("adm2"), "m1", 0)), Ok(()), "an admin outranks a member");
    assert_eq!(
        outcome(&demoted, mute_for(by("adm"), "m1", 0)),
        Err(DomainError::Forbidden { needs: "admin" })
    );
}

#[test]
fn an_admin_may_restrict_itself_but_never_lift_or_cut_short_what_it_cannot_lift() {
    let room = room();
    let self_muted = run(&room, mute_for(by("adm"), "adm", 60)).unwrap().state;
    assert_eq!(outcome(&self_muted, mute_for(by("adm"), "adm", 0)), lift_refused("mute", "admin", "owner"));
    let owner_muted = run(&room, mute_for(by("owner"), "adm", 60)).unwrap().state;
    assert_eq!(
        outcome(&owner_muted, mute_for(by("adm"), "adm", 1)),
        lift_refused("mute", "owner", "service"),
        "a shorter mute cuts it short: a lift"
    );
    let longer = run(&owner_muted, mute_for(by("adm"), "adm", 600)).unwrap();
    assert_eq!(longer.state.mutes[&user("adm")].until_ms, 601_000, "an extension is no lift");
    assert_eq!(longer.state.mutes[&user("adm")].by, "owner", "still the owner's to lift");
    assert_eq!(longer.events[0].payload["by"], "adm", "the event tells who extended it");
    let self_kicked = run(&room, ban(by("adm"), "adm", 60)).unwrap().state;
    assert_eq!(self_kicked.bans[&user("adm")].by, "adm");
    assert_eq!(outcome(&self_kicked, unban(by("owner"), "adm")), Ok(()), "the owner lifts it");
}

#[test]
fn a_banned_admin_neither_lifts_its_ban_nor_rejoins_nor_moderates_until_it_ends() {
    let banned = run(&room(), ban(by("owner"), "adm", 60)).unwrap().state;
    let suspended = Err(DomainError::SuspendedByBan { until_ms: 61_000 });
    let info = InfoChange { title: Some("Mine".into()), ..InfoChange::default() };
    let write = AttributeWrite { set: [("k".into(), "v".into())].into(), ..AttributeWrite::default() };
    let commands = [
        unban(by("adm"), "adm"),
        Command::KickUser { by: by("adm"), user_id: user("m1"), ban_s: 0, reason: String::new() },
        mute_for(by("adm"), "m1", 60),
        mute_for(by("adm"), "adm", 60),
        Command::MuteAll { by: by("adm"), muted: true },
        Command::UpdateRoomInfo { by: by("adm"), info: info.clone() },
        Command::SetAttributes { by: by("adm"), write },
    ];
    for command in commands {
        assert_eq!(outcome(&banned, command.clone()), suspended, "{command:?}");
        assert!(run_at(&banned, command.clone(), 61_000).is_ok(), "{command:?} once the ban ended");
    }
    let join = Command::JoinRoom { user_id: user("adm") };
    assert_eq!(outcome(&banned, join.clone()), Err(DomainError::Banned { until_ms: 61_000 }));
    let member_banned = run(&banned, ban(by("owner"), "m2", 60)).unwrap().state;
    assert_eq!(
        outcome(&member_banned, mute_for(by("m2"), "m1", 60)),
        Err(DomainError::Forbidden { needs: "admin" }),
        "a banned member lacks the role anyway"
    );
    let lifted = run(&banned, unban(by("owner"), "adm")).unwrap().state;
    assert_eq!(outcome(&lifted, join), Ok(()), "the owner lifted it");
    assert_eq!(outcome(&lifted, Command::UpdateRoomInfo { by: by("adm"), info }), Ok(()));
}

#[test]
fn a_banned_admin_takes_no_seat_moderation_and_a_banned_owner_no_close() {
    let create = Command::CreateRoom {
        owner_id: user("owner"),
        title: "Live".into(),
        seats: SeatConfig { count: 2, mode: SeatMode::Free },
    };
    let mut state = crate::domain::apply(None, &create, &ctx(0)).unwrap().state;
    for command in [
        Command::JoinRoom { user_id: user("m1") },
        Command::SetAdmin { by: by("owner"), user_id: user("adm"), admin: true },
        Command::Seat { by: by("m1"), action: SeatAction::Take { index: Some(0) } },
        ban(by("owner"), "adm", 60),
    ] {
        state = run(&state, command).unwrap().state;
    }
    let suspended = Err(DomainError::SuspendedByBan { until_ms: 61_000 });
    for action in [
        SeatAction::Kick { index: 0 },
        SeatAction::Lock { index: 1, locked: true },
        SeatAction::Mute { index: 0, muted: true },
    ] {
        assert_eq!(
            outcome(&state, Command::Seat { by: by("adm"), action: action.clone() }),
            suspended,
            "{action:?}"
        );
    }
    let owner_banned = run(&state, ban(service(), "owner", 60)).unwrap().state;
    let close = Command::CloseRoom { by: Some(by("owner")), idle: false };
    assert_eq!(outcome(&owner_banned, close), suspended);
    assert_eq!(outcome(&owner_banned, unban(by("owner"), "owner")), suspended);
    assert_eq!(outcome(&owner_banned, unban(service(), "owner")), Ok(()));
}
