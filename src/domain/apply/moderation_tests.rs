//! The role matrix and the moderation commands (SPEC §14.2).

use serde_json::json;

use super::*;
use crate::domain::apply::tests::user;
use crate::domain::command::{AttributeWrite, InfoChange};
use crate::domain::{Applied, Change, Command, CommandContext, RoomState};

/// The shared context, with at most two admins.
fn ctx(now_ms: i64) -> CommandContext {
    CommandContext { max_admins: 2, ..crate::domain::apply::tests::ctx(now_ms) }
}

/// `command` applied to `state` at `now_ms` (shared with the seat tests).
pub(crate) fn run_at(state: &RoomState, command: Command, now_ms: i64) -> Result<Applied, DomainError> {
    crate::domain::apply(Some(state), &command, &ctx(now_ms))
}

/// `command` applied to `state` at 1,000 ms.
pub(crate) fn run(state: &RoomState, command: Command) -> Result<Applied, DomainError> {
    run_at(state, command, 1_000)
}

/// A user as an actor.
pub(crate) fn by(id: &str) -> Actor {
    Actor::User(user(id))
}

/// A room of `owner` with admin `adm` and members `m1`, `m2`, `adm`.
fn room() -> RoomState {
    let create =
        Command::CreateRoom { owner_id: user("owner"), title: "Live".into(), seats: Default::default() };
    let mut state = crate::domain::apply(None, &create, &ctx(0)).unwrap().state;
    for id in ["m1", "m2", "adm"] {
        state = run(&state, Command::JoinRoom { user_id: user(id) }).unwrap().state;
    }
    run(&state, Command::SetAdmin { by: by("owner"), user_id: user("adm"), admin: true }).unwrap().state
}

fn mute(actor: Actor, target: &str) -> Command {
    Command::MuteUser { by: actor, user_id: user(target), duration_s: 60 }
}

fn needs(result: Result<Applied, DomainError>) -> Option<&'static str> {
    match result {
        Err(DomainError::Forbidden { needs }) => Some(needs),
        Ok(_) => None,
        Err(other) => panic!("expected forbidden or applied, got {other:?}"),
    }
}

#[test]
fn owner_admin_member_and_service_moderate_as_the_matrix_says() {
    let room = room();
    let service = Actor::Service("ops".into());
    // (actor, target, the role it lacks or None when allowed)
    let cases = [
        (by("owner"), "m1", None),
        (by("owner"), "adm", None),
        (by("adm"), "m1", None),
        (by("adm"), "adm", None),
        (by("adm"), "owner", Some("service")),
        (by("m1"), "m2", Some("admin")),
        (by("m1"), "m1", Some("admin")),
        (service.clone(), "owner", None),
        (service.clone(), "adm", None),
    ];
    for (actor, target, want) in cases {
        assert_eq!(needs(run(&room, mute(actor.clone(), target))), want, "{actor:?} mutes {target}");
    }
    let admin2 =
        run(&room, Command::SetAdmin { by: by("owner"), user_id: user("m2"), admin: true }).unwrap().state;
    assert_eq!(needs(run(&admin2, mute(by("adm"), "m2"))), Some("owner"), "an admin never moderates another");
    for actor in [by("adm"), by("m1")] {
        let appoint = Command::SetAdmin { by: actor, user_id: user("m2"), admin: true };
        assert_eq!(needs(run(&room, appoint)), Some("owner"), "only the owner appoints");
    }
    for actor in [by("adm"), by("m1")] {
        let close = Command::CloseRoom { by: Some(actor), idle: false };
        assert_eq!(needs(run(&room, close)), Some("owner"), "only the owner closes");
    }
    let info = InfoChange { title: Some("New".into()), ..InfoChange::default() };
    assert_eq!(
        needs(run(&room, Command::UpdateRoomInfo { by: by("m1"), info: info.clone() })),
        Some("admin")
    );
    assert_eq!(needs(run(&room, Command::UpdateRoomInfo { by: by("adm"), info })), None);
    assert_eq!(needs(run(&room, Command::MuteAll { by: by("m1"), muted: true })), Some("admin"));
    let write =
        AttributeWrite { set: [("k".to_owned(), "v".to_owned())].into(), ..AttributeWrite::default() };
    assert_eq!(needs(run(&room, Command::SetAttributes { by: by("m1"), write })), Some("admin"));
}

#[test]
fn a_refusal_changes_nothing() {
    let room = room();
    let refused = run(&room, mute(by("m1"), "m2"));
    assert!(refused.is_err());
    assert!(room.mutes.is_empty() && room.version == 5);
}

#[test]
fn a_kick_removes_and_bans_until_it_expires_or_is_lifted() {
    let room = room();
    let kick = Command::KickUser { by: by("adm"), user_id: user("m1"), ban_s: 60, reason: "spam".into() };
    let kicked = run(&room, kick).unwrap();
    assert_eq!(kicked.events[0].event_type, EventType::RoomUserKicked);
    assert_eq!(kicked.events[0].payload["until_ms"], 61_000);
    assert_eq!(kicked.events[0].payload["by"], "adm");
    assert!(!kicked.state.members.contains_key(&user("m1")));
    assert!(kicked.changes.contains(&Change::MemberLeft { user_id: user("m1") }));
    let join = || Command::JoinRoom { user_id: user("m1") };
    assert_eq!(run_at(&kicked.state, join(), 60_999), Err(DomainError::Banned { until_ms: 61_000 }));
    assert!(run_at(&kicked.state, join(), 61_000).unwrap().applied, "expired on the room's clock");
    let unban = Command::UnbanUser { by: by("owner"), user_id: user("m1") };
    let lifted = run(&kicked.state, unban.clone()).unwrap();
    assert_eq!(lifted.events[0].event_type, EventType::RoomUserUnbanned);
    assert!(run(&lifted.state, join()).unwrap().applied);
    assert!(!run(&lifted.state, unban).unwrap().applied, "no ban: nothing to lift");
}

#[test]
fn a_ban_needs_no_membership_but_a_plain_removal_does() {
    let room = room();
    let ban =
        Command::KickUser { by: by("owner"), user_id: user("stranger"), ban_s: 10, reason: String::new() };
    assert!(run(&room, ban).unwrap().applied, "banned before they arrive");
    let remove =
        Command::KickUser { by: by("owner"), user_id: user("stranger"), ban_s: 0, reason: String::new() };
    assert_eq!(run(&room, remove), Err(DomainError::NotMember { user_id: "stranger".into() }));
}

#[test]
fn mutes_take_their_duration_and_zero_lifts_them() {
    let room = room();
    let muted = run(&room, mute(by("owner"), "m1")).unwrap();
    assert_eq!(muted.events[0].payload, json!({"user_id": "m1", "until_ms": 61_000, "by": "owner"}));
    let lift = Command::MuteUser { by: by("owner"), user_id: user("m1"), duration_s: 0 };
    let unmuted = run(&muted.state, lift.clone()).unwrap();
    assert_eq!(unmuted.events[0].event_type, EventType::RoomUserUnmuted);
    assert!(!run(&unmuted.state, lift).unwrap().applied);
    let too_long =
        Command::MuteUser { by: by("owner"), user_id: user("m1"), duration_s: MAX_RESTRICTION_S + 1 };
    assert!(matches!(run(&room, too_long), Err(DomainError::InvalidArgument { field: "duration_s", .. })));
}

#[test]
fn admins_are_bounded_and_survive_leave_and_rejoin() {
    let room = room();
    let appoint = |id: &str| Command::SetAdmin { by: by("owner"), user_id: user(id), admin: true };
    let two = run(&room, appoint("m1")).unwrap().state;
    assert_eq!(run(&two, appoint("m2")), Err(DomainError::TooManyAdmins { max: 2 }));
    let left =
        run(&two, Command::LeaveRoom { user_id: user("m1"), reason: crate::domain::LeaveReason::User })
            .unwrap()
            .state;
    assert_eq!(left.user_role(&user("m1")), Role::Admin, "a role is the room's, not the membership's");
    assert!(matches!(
        run(&room, appoint("owner")),
        Err(DomainError::InvalidArgument { field: "user_id", .. })
    ));
}

#[test]
fn attributes_carry_versions_and_conditional_writes_conflict() {
    let room = room();
    let write = |set: &[(&str, &str)], expect: &[(&str, u64)]| Command::SetAttributes {
        by: by("adm"),
        write: AttributeWrite {
            set: set.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            delete: Vec::new(),
            expect: expect.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
        },
    };
    let first = run(&room, write(&[("topic", "music")], &[("topic", 0)])).unwrap();
    let version = first.state.attributes["topic"].version;
    assert_eq!(version, first.state.version);
    assert_eq!(first.events[0].payload["versions"]["topic"], version);
    let stale = run(&first.state, write(&[("topic", "talk")], &[("topic", 0)]));
    assert_eq!(stale, Err(DomainError::AttributeConflict { key: "topic".into(), version }));
    assert!(run(&first.state, write(&[("topic", "talk")], &[("topic", version)])).unwrap().applied);
    let bad_key = run(&room, write(&[("no spaces", "x")], &[]));
    assert!(matches!(bad_key, Err(DomainError::InvalidArgument { field: "set", .. })));
    let big = "x".repeat(2 * 1024 + 1);
    assert!(run(&room, write(&[("k", &big)], &[])).is_err(), "a value over 2 KB");
    let mut full = room.clone();
    for i in 0..8 {
        let value = "v".repeat(2048);
        full = run(&full, write(&[(&format!("k{i}"), &value)], &[])).unwrap().state;
    }
    assert!(run(&full, write(&[("one_more", "x")], &[])).is_err(), "16 KB of values at most");
}

#[test]
fn a_large_attribute_write_names_its_keys_without_values() {
    let room = room();
    let value = "v".repeat(2000);
    let write = AttributeWrite { set: [("k".to_owned(), value)].into(), ..AttributeWrite::default() };
    let applied = run(&room, Command::SetAttributes { by: by("adm"), write }).unwrap();
    assert_eq!(applied.events[0].payload["values_omitted"], true);
    assert_eq!(applied.events[0].payload["set"], json!({}));
    assert!(applied.events[0].payload["versions"]["k"].is_u64());
}

#[test]
fn info_checks_its_fields_and_tells_only_what_changed() {
    let room = room();
    let info =
        |title: Option<&str>, announcement: Option<&str>, cover: Option<&str>| Command::UpdateRoomInfo {
            by: by("owner"),
            info: InfoChange {
                title: title.map(Into::into),
                announcement: announcement.map(Into::into),
                cover_url: cover.map(Into::into),
                seat_mode: None,
            },
        };
    let changed = run(&room, info(Some("Live"), Some("Be kind"), None)).unwrap();
    assert_eq!(
        changed.events[0].payload,
        json!({"announcement": "Be kind", "by": "owner"}),
        "the title was Live"
    );
    assert!(!run(&changed.state, info(Some("Live"), None, None)).unwrap().applied);
    let refused = |command| match run(&room, command) {
        Err(DomainError::InvalidArgument { field, .. }) => field,
        other => panic!("{other:?}"),
    };
    assert_eq!(refused(info(Some(&"t".repeat(65)), None, None)), "title");
    assert_eq!(refused(info(None, Some(&"a".repeat(1001)), None)), "announcement");
    assert_eq!(refused(info(None, None, Some("http://x"))), "cover_url");
    assert_eq!(refused(info(None, None, None)), "info");
}

#[test]
fn the_close_tells_its_reason_and_the_lives_summary() {
    let mut room = room();
    let gift = Command::SendGift {
        sender_id: user("m1"),
        receiver_id: user("owner"),
        gift_id: crate::domain::GiftId::parse("rose").unwrap(),
        count: 3,
        unit_value: 10,
    };
    room = run(&room, gift.clone()).unwrap().state;
    room = run(&room, gift).unwrap().state;
    let closed = run_at(&room, Command::CloseRoom { by: Some(by("owner")), idle: false }, 5_000).unwrap();
    let payload = &closed.events[0].payload;
    assert_eq!(payload["reason"], "owner");
    assert_eq!(
        payload["summary"],
        json!({"duration_ms": 5_000, "peak_members": 3, "gifts": 2, "gift_value": 60, "unique_senders": 1})
    );
    let by_ops =
        run(&room, Command::CloseRoom { by: Some(Actor::Service("ops".into())), idle: false }).unwrap();
    assert_eq!(by_ops.events[0].payload["reason"], "admin");
}

#[test]
fn an_idle_close_closes_only_a_room_empty_and_silent_for_idle_close_after() {
    let idle = Command::CloseRoom { by: None, idle: true };
    let at = |now_ms, after: Option<i64>| CommandContext { idle_close_after_ms: after, ..ctx(now_ms) };
    let room = room();
    let members_came = crate::domain::apply(Some(&room), &idle, &at(1_000_000, Some(1))).unwrap();
    assert!(!members_came.applied, "members came");
    let create =
        Command::CreateRoom { owner_id: user("owner"), title: "Live".into(), seats: Default::default() };
    let empty = crate::domain::apply(None, &create, &at(0, None)).unwrap().state;
    // Created at 0: silent for 5 s at 5_000, not at 4_999; never while idle close is off.
    for (now_ms, after, applies) in
        [(4_999, Some(5_000), false), (5_000, Some(5_000), true), (9_999_999, None, false)]
    {
        let closed = crate::domain::apply(Some(&empty), &idle, &at(now_ms, after)).unwrap();
        assert_eq!(closed.applied, applies, "at {now_ms} after {after:?}");
        if applies {
            assert_eq!(closed.events[0].payload["reason"], "idle");
        }
    }
}

#[path = "lift_tests.rs"]
mod lifts;
