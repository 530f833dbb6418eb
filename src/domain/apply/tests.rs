use super::*;
use crate::domain::LeaveReason;
use crate::domain::{CommandId, GIFT_RANK_SIZE, GiftId, RankEntry, RoomId};

/// The context of a command at `now_ms` in room `r1` (shared with the moderation tests).
pub(crate) fn ctx(now_ms: i64) -> CommandContext {
    CommandContext {
        room_id: RoomId::parse("r1").unwrap(),
        command_id: CommandId::parse("c1").unwrap(),
        request_id: "req".into(),
        now_ms,
        max_admins: crate::domain::DEFAULT_MAX_ADMINS,
        seat_request_ttl_ms: crate::domain::DEFAULT_SEAT_REQUEST_TTL_MS,
        idle_close_after_ms: None,
    }
}

/// A user id.
pub(crate) fn user(id: &str) -> UserId {
    UserId::parse(id).unwrap()
}

fn open_room() -> RoomState {
    let create =
        Command::CreateRoom { owner_id: user("owner"), title: "Live".into(), seats: Default::default() };
    apply(None, &create, &ctx(1)).unwrap().state
}

fn run(state: &RoomState, command: Command) -> Result<Applied, DomainError> {
    apply(Some(state), &command, &ctx(100))
}

fn join(state: &RoomState, id: &str) -> RoomState {
    run(state, Command::JoinRoom { user_id: user(id) }).unwrap().state
}

fn gift(sender: &str, count: u32, unit_value: u32) -> Command {
    Command::SendGift {
        sender_id: user(sender),
        receiver_id: user("owner"),
        gift_id: GiftId::parse("rocket").unwrap(),
        count,
        unit_value,
    }
}

fn types(applied: &Applied) -> Vec<EventType> {
    applied.events.iter().map(|e| e.event_type).collect()
}

#[test]
fn create_makes_an_open_room_at_version_one() {
    let create =
        Command::CreateRoom { owner_id: user("owner"), title: "Live".into(), seats: Default::default() };
    let applied = apply(None, &create, &ctx(1)).unwrap();
    assert!(applied.applied);
    assert_eq!(applied.state.status, RoomStatus::Open);
    assert_eq!(applied.state.version, 1);
    assert_eq!(types(&applied), vec![EventType::RoomCreated]);
}

#[test]
fn create_on_an_existing_room_is_refused() {
    let create =
        Command::CreateRoom { owner_id: user("owner"), title: "Again".into(), seats: Default::default() };
    assert_eq!(run(&open_room(), create), Err(DomainError::RoomExists));
}

#[test]
fn create_refuses_empty_or_control_titles() {
    for title in ["", "a\nb", &"t".repeat(129)] {
        let create =
            Command::CreateRoom { owner_id: user("o"), title: title.into(), seats: Default::default() };
        assert!(matches!(
            apply(None, &create, &ctx(1)),
            Err(DomainError::InvalidArgument { field: "title", .. })
        ));
    }
}

#[test]
fn commands_on_a_missing_room_are_not_found() {
    let result = apply(None, &Command::JoinRoom { user_id: user("u") }, &ctx(1));
    assert_eq!(result, Err(DomainError::RoomNotFound));
}

#[test]
fn join_adds_a_member_and_bumps_the_version() {
    let applied = run(&open_room(), Command::JoinRoom { user_id: user("u1") }).unwrap();
    assert!(applied.applied);
    assert_eq!(applied.state.version, 2);
    assert_eq!(applied.state.members[&user("u1")].joined_at_ms, 100);
    assert_eq!(types(&applied), vec![EventType::RoomUserJoined]);
}

#[test]
fn duplicate_join_is_not_applied_and_has_no_events() {
    let room = join(&open_room(), "u1");
    let applied = run(&room, Command::JoinRoom { user_id: user("u1") }).unwrap();
    assert!(!applied.applied);
    assert!(applied.events.is_empty());
    assert_eq!(applied.state, room);
}

#[test]
fn leave_of_a_non_member_is_not_applied() {
    let room = open_room();
    let applied =
        run(&room, Command::LeaveRoom { user_id: user("ghost"), reason: LeaveReason::User }).unwrap();
    assert!(!applied.applied);
    assert!(applied.events.is_empty());
    assert_eq!(applied.state.version, room.version);
}

#[test]
fn leave_removes_the_member_with_its_reason() {
    let room = join(&open_room(), "u1");
    let applied = run(&room, Command::LeaveRoom { user_id: user("u1"), reason: LeaveReason::Stale }).unwrap();
    assert!(applied.state.members.is_empty());
    assert_eq!(types(&applied), vec![EventType::RoomUserLeft]);
    assert_eq!(applied.events[0].payload["reason"], "stale");
}

#[test]
fn gift_by_a_non_member_is_refused() {
    let result = run(&open_room(), gift("stranger", 1, 1));
    assert_eq!(result, Err(DomainError::NotMember { user_id: "stranger".into() }));
}

#[test]
fn gift_counts_out_of_range_are_invalid() {
    let room = join(&open_room(), "u1");
    for (count, unit_value, field) in
        [(0, 1, "count"), (10_000, 1, "count"), (1, 0, "unit_value"), (1, 1_000_001, "unit_value")]
    {
        let result = run(&room, gift("u1", count, unit_value));
        assert!(matches!(result, Err(DomainError::InvalidArgument { field: f, .. }) if f == field));
    }
}

#[test]
fn gift_adds_heat_and_ranks_the_sender() {
    let room = join(&open_room(), "u1");
    let applied = run(&room, gift("u1", 3, 100)).unwrap();
    assert_eq!(applied.state.heat, 300);
    assert_eq!(applied.state.gift_rank, vec![RankEntry { user_id: user("u1"), total_value: 300 }]);
    assert_eq!(
        types(&applied),
        vec![EventType::RoomGiftSent, EventType::RoomHeatChanged, EventType::RoomRankChanged]
    );
}

#[test]
fn rank_changed_only_when_the_order_changes() {
    let room = join(&join(&open_room(), "a"), "b");
    let room = run(&room, gift("a", 1, 100)).unwrap().state;
    let room = run(&room, gift("b", 1, 50)).unwrap().state;
    // a stays ahead of b: no RankChanged.
    let same = run(&room, gift("a", 1, 10)).unwrap();
    assert_eq!(types(&same), vec![EventType::RoomGiftSent, EventType::RoomHeatChanged]);
    // b overtakes a: RankChanged.
    let overtakes = run(&same.state, gift("b", 1, 500)).unwrap();
    assert_eq!(overtakes.events.last().unwrap().event_type, EventType::RoomRankChanged);
    assert_eq!(overtakes.state.gift_rank[0].user_id, user("b"));
}

#[test]
fn rank_ties_go_to_the_earliest_sender_and_keep_ten() {
    let mut room = open_room();
    for i in 0..12 {
        room = join(&room, &format!("u{i:02}"));
    }
    for i in (0..12).rev() {
        room = run(&room, gift(&format!("u{i:02}"), 1, 7)).unwrap().state;
    }
    assert_eq!(room.gift_rank.len(), 10);
    assert_eq!(room.gift_rank[0].user_id, user("u11"), "earliest sender wins the tie");
}

#[test]
fn heat_overflow_is_refused_and_changes_nothing() {
    let mut room = join(&open_room(), "u1");
    room.heat = i64::MAX - 10;
    assert_eq!(run(&room, gift("u1", 1, 11)), Err(DomainError::HeatOverflow));
}

#[test]
fn close_removes_members_and_refuses_everything_after() {
    let room = join(&open_room(), "u1");
    let closed = run(&room, Command::CloseRoom { by: None, idle: false }).unwrap();
    assert_eq!(closed.state.status, RoomStatus::Closed);
    assert!(closed.state.members.is_empty());
    assert_eq!(types(&closed), vec![EventType::RoomClosed]);
    for command in [
        Command::JoinRoom { user_id: user("u2") },
        gift("u1", 1, 1),
        Command::CloseRoom { by: None, idle: false },
    ] {
        assert_eq!(run(&closed.state, command), Err(DomainError::RoomClosed));
    }
}

#[test]
fn a_restored_room_keeps_its_members_and_when_they_joined() {
    let room = join(&join(&open_room(), "a"), "b");
    let members = room.members.iter().map(|(id, m)| (id.clone(), m.joined_at_ms));
    let restored = RoomState::restore(room.snapshot(), members, room.senders.clone(), Vec::new(), Vec::new());
    assert_eq!(restored, room, "presence is not part of the room: nothing is lost on a reload");
}

#[test]
fn commands_report_the_rows_they_change() {
    let room = join(&open_room(), "u1");
    let applied = run(&room, gift("u1", 2, 50)).unwrap();
    let total = SenderTotal { total_value: 100, first_version: 3 };
    assert_eq!(applied.changes, vec![Change::SenderTotal { user_id: user("u1"), total }]);
    let left = run(&room, Command::LeaveRoom { user_id: user("u1"), reason: LeaveReason::User }).unwrap();
    assert_eq!(left.changes, vec![Change::MemberLeft { user_id: user("u1") }]);
    let closed = run(&room, Command::CloseRoom { by: None, idle: false }).unwrap();
    assert_eq!(closed.changes, vec![Change::MembersCleared]);
    let joined = run(&room, Command::JoinRoom { user_id: user("u2") }).unwrap();
    assert_eq!(joined.changes, vec![Change::MemberJoined { user_id: user("u2"), joined_at_ms: 100 }]);
    assert!(run(&room, Command::JoinRoom { user_id: user("u1") }).unwrap().changes.is_empty());
}

#[test]
fn applying_leaves_the_input_state_untouched() {
    let room = join(&open_room(), "u1");
    let before = room.clone();
    let joined = run(&room, Command::JoinRoom { user_id: user("u2") }).unwrap();
    assert_eq!(room, before, "structural sharing never mutates the original");
    assert_eq!(joined.state.members.len(), 2);
}

#[test]
fn incremental_rank_matches_a_full_sort_of_every_sender() {
    let mut room = open_room();
    for i in 0..30 {
        room = join(&room, &format!("u{i:02}"));
    }
    // Deterministic but shuffled gift values, many senders beyond the top 10.
    for step in 0..200u32 {
        let sender = format!("u{:02}", (step * 7 + step / 3) % 30);
        room = run(&room, gift(&sender, 1 + step % 5, 1 + (step * 13) % 97)).unwrap().state;
        let mut all: Vec<(&UserId, &SenderTotal)> = room.senders.iter().collect();
        all.sort_by(|(a_id, a), (b_id, b)| {
            b.total_value.cmp(&a.total_value).then(a.first_version.cmp(&b.first_version)).then(a_id.cmp(b_id))
        });
        let full: Vec<RankEntry> = all
            .into_iter()
            .take(GIFT_RANK_SIZE)
            .map(|(id, t)| RankEntry { user_id: id.clone(), total_value: t.total_value })
            .collect();
        assert_eq!(room.gift_rank, full, "after step {step}");
    }
}
