//! Property tests of [`apply`]: arbitrary command sequences checked, step by step, against a
//! small reference model written independently of the domain code.
//!
//! The model keeps members, sender totals and the heat in plain `BTreeMap`s and wide integers
//! (`i128`/`u128`, so it never overflows where the domain must refuse), and derives the gift
//! rank by a full sort of every sender. After every command the test checks that `apply`
//! refused, skipped or applied exactly as the model predicts, that the new state equals the
//! model, and that the events and the [`Change`] rows describe the state diff.

use std::collections::BTreeMap;

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::select;
use proptest::test_runner::TestCaseError;

use super::apply::{MAX_GIFT_COUNT, MAX_TITLE_CHARS, MAX_UNIT_VALUE};
use super::{
    Applied, Change, Command, CommandContext, CommandId, DomainError, EventType, GIFT_RANK_SIZE, GiftId,
    IdError, LeaveReason, RankEntry, RoomId, RoomState, RoomStatus, SenderTotal, UserId, apply,
};

/// User ids the sequences draw from: few enough that joins, leaves and gifts collide, more than
/// [`GIFT_RANK_SIZE`] so the rank has to drop senders.
static POOL: [&str; 13] = ["u0", "u1", "u2", "u3", "u4", "u5", "u6", "u7", "u8", "u9", "u10", "u11", "whale"];

/// A command before its ids are validated: what a client could send.
#[derive(Debug, Clone)]
enum Op {
    /// CreateRoom.
    Create { owner: String, title: String },
    /// JoinRoom.
    Join { user: String },
    /// LeaveRoom.
    Leave { user: String, reason: LeaveReason },
    /// SendGift.
    Gift { sender: String, receiver: String, gift: String, count: u32, unit_value: u32 },
    /// CloseRoom.
    Close,
}

/// The state a sequence starts from.
#[derive(Debug, Clone)]
enum Start {
    /// No room yet.
    Missing,
    /// A room just created.
    Fresh,
    /// A created room that every pool user but `whale` joined (the rank fills up quickly).
    Busy,
    /// A room near the heat ceiling: `whale` (not a member) gave `i64::MAX - gap`.
    Hot { version: u64, gap: u64 },
}

/// What the model expects `apply` to do.
#[derive(Debug, Clone, PartialEq)]
enum Outcome {
    /// The command changes the room.
    Applied,
    /// The command is accepted but changes nothing (join of a member, leave of a non-member).
    NoOp,
    /// The command is refused.
    Refused(DomainError),
}

/// The reference model of one room.
#[derive(Debug, Clone, PartialEq)]
struct Model {
    /// Open or closed.
    status: RoomStatus,
    /// +1 per applied command.
    version: u64,
    /// Members and when they joined.
    members: BTreeMap<UserId, i64>,
    /// Sum of every gift, wide so that it can exceed `i64::MAX` in the model.
    heat: i128,
    /// Sender → (total, version of the first gift).
    senders: BTreeMap<UserId, (u128, u64)>,
}

impl Model {
    /// The model of an existing state (trusted: only consistent states are used as starts).
    fn of(state: &RoomState) -> Model {
        Model {
            status: state.status,
            version: state.version,
            members: state.members.iter().map(|(id, m)| (id.clone(), m.joined_at_ms)).collect(),
            heat: i128::from(state.heat),
            senders: state
                .senders
                .iter()
                .map(|(id, t)| (id.clone(), (u128::from(t.total_value), t.first_version)))
                .collect(),
        }
    }

    /// What `command` does to a room in this state, and the model after it.
    fn step(room: Option<&Model>, command: &Command, now_ms: i64) -> (Outcome, Option<Model>) {
        let refused = |e| (Outcome::Refused(e), room.cloned());
        let Some(room) = room else {
            return match command {
                Command::CreateRoom { title, .. } => {
                    let chars = title.chars().count();
                    if chars == 0 || chars > MAX_TITLE_CHARS || title.chars().any(char::is_control) {
                        refused(invalid("title"))
                    } else {
                        let model = Model {
                            status: RoomStatus::Open,
                            version: 1,
                            members: BTreeMap::new(),
                            heat: 0,
                            senders: BTreeMap::new(),
                        };
                        (Outcome::Applied, Some(model))
                    }
                }
                _ => refused(DomainError::RoomNotFound),
            };
        };
        if room.status == RoomStatus::Closed {
            return refused(DomainError::RoomClosed);
        }
        let mut next = room.clone();
        next.version += 1;
        match command {
            Command::CreateRoom { .. } => return refused(DomainError::RoomExists),
            Command::JoinRoom { user_id } => {
                if next.members.insert(user_id.clone(), now_ms).is_some() {
                    return (Outcome::NoOp, Some(room.clone()));
                }
            }
            Command::LeaveRoom { user_id, .. } => {
                if next.members.remove(user_id).is_none() {
                    return (Outcome::NoOp, Some(room.clone()));
                }
            }
            Command::SendGift { sender_id, count, unit_value, .. } => {
                if !(1..=MAX_GIFT_COUNT).contains(count) {
                    return refused(invalid("count"));
                }
                if !(1..=MAX_UNIT_VALUE).contains(unit_value) {
                    return refused(invalid("unit_value"));
                }
                if !next.members.contains_key(sender_id) {
                    return refused(DomainError::NotMember { user_id: sender_id.to_string() });
                }
                let value = u128::from(*count) * u128::from(*unit_value);
                next.heat += value as i128;
                if next.heat > i128::from(i64::MAX) {
                    return refused(DomainError::HeatOverflow);
                }
                let version = next.version;
                next.senders.entry(sender_id.clone()).or_insert((0, version)).0 += value;
            }
            Command::CloseRoom => {
                next.status = RoomStatus::Closed;
                next.members.clear();
            }
        }
        (Outcome::Applied, Some(next))
    }

    /// The top [`GIFT_RANK_SIZE`] senders by a full sort: highest total first, then the earliest
    /// first gift, then the user id.
    fn rank(&self) -> Vec<RankEntry> {
        let mut all: Vec<(&UserId, &(u128, u64))> = self.senders.iter().collect();
        all.sort_by(|(a_id, (a_total, a_first)), (b_id, (b_total, b_first))| {
            b_total.cmp(a_total).then(a_first.cmp(b_first)).then(a_id.cmp(b_id))
        });
        all.into_iter()
            .take(GIFT_RANK_SIZE)
            .map(|(id, (total, _))| RankEntry { user_id: id.clone(), total_value: *total as u64 })
            .collect()
    }
}

/// An `InvalidArgument` naming `field` (the reason is not compared).
fn invalid(field: &'static str) -> DomainError {
    DomainError::InvalidArgument { field, reason: String::new() }
}

/// The same refusal, ignoring the free-text reason of `InvalidArgument`.
fn same_refusal(got: &DomainError, want: &DomainError) -> bool {
    match (got, want) {
        (DomainError::InvalidArgument { field: a, .. }, DomainError::InvalidArgument { field: b, .. }) => {
            a == b
        }
        _ => got == want,
    }
}

/// The id rule of room, user and gift ids, written from the documentation: 1–64 characters of
/// `[A-Za-z0-9_.-]`.
fn is_valid_name(s: &str) -> bool {
    (1..=64).contains(&s.chars().count())
        && s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

/// Builds the command, or the id error a client would get for it at the boundary.
fn command(op: &Op) -> Result<Command, IdError> {
    Ok(match op {
        Op::Create { owner, title } => {
            Command::CreateRoom { owner_id: UserId::parse(owner.as_str())?, title: title.clone() }
        }
        Op::Join { user } => Command::JoinRoom { user_id: UserId::parse(user.as_str())? },
        Op::Leave { user, reason } => {
            Command::LeaveRoom { user_id: UserId::parse(user.as_str())?, reason: *reason }
        }
        Op::Gift { sender, receiver, gift, count, unit_value } => Command::SendGift {
            sender_id: UserId::parse(sender.as_str())?,
            receiver_id: UserId::parse(receiver.as_str())?,
            gift_id: GiftId::parse(gift.as_str())?,
            count: *count,
            unit_value: *unit_value,
        },
        Op::Close => Command::CloseRoom,
    })
}

/// The raw id strings of an op.
fn raw_ids(op: &Op) -> Vec<&str> {
    match op {
        Op::Create { owner, .. } => vec![owner],
        Op::Join { user } | Op::Leave { user, .. } => vec![user],
        Op::Gift { sender, receiver, gift, .. } => vec![sender, receiver, gift],
        Op::Close => vec![],
    }
}

/// The context of step `step`: the clock moves on so `joined_at_ms` tells the steps apart.
fn ctx(step: usize) -> CommandContext {
    CommandContext {
        room_id: RoomId::parse("room").unwrap(),
        command_id: CommandId::parse(format!("c{step}")).unwrap(),
        request_id: "req".into(),
        now_ms: 1_000 + step as i64,
    }
}

/// The state a sequence starts from.
fn start_state(start: &Start) -> Option<RoomState> {
    let create = Command::CreateRoom { owner_id: UserId::parse("owner").unwrap(), title: "Live".into() };
    let fresh = || apply(None, &create, &ctx(0)).unwrap().state;
    match start {
        Start::Missing => None,
        Start::Fresh => Some(fresh()),
        Start::Busy => {
            let mut room = fresh();
            for user in &POOL[..POOL.len() - 1] {
                let join = Command::JoinRoom { user_id: UserId::parse(*user).unwrap() };
                room = apply(Some(&room), &join, &ctx(0)).unwrap().state;
            }
            Some(room)
        }
        Start::Hot { version, gap } => {
            let mut room = fresh();
            let whale = UserId::parse("whale").unwrap();
            let heat = i64::MAX - *gap as i64;
            room.version = *version;
            room.heat = heat;
            room.senders.insert(whale.clone(), SenderTotal { total_value: heat as u64, first_version: 1 });
            room.gift_rank = vec![RankEntry { user_id: whale, total_value: heat as u64 }];
            Some(room)
        }
    }
}

/// Checks a state against the model and the invariants every state keeps.
fn check_state(state: &RoomState, model: &Model) -> Result<(), TestCaseError> {
    prop_assert_eq!(&Model::of(state), model);
    prop_assert_eq!(state.snapshot().member_count, state.members.len() as u64);
    prop_assert_eq!(state.snapshot().version, state.version);
    if state.status == RoomStatus::Closed {
        prop_assert!(state.members.is_empty(), "a closed room has no members");
    }
    let senders_sum: u128 = state.senders.values().map(|t| u128::from(t.total_value)).sum();
    prop_assert_eq!(i128::from(state.heat), senders_sum as i128, "heat is the sum of the sender totals");
    prop_assert!(state.gift_rank.len() <= GIFT_RANK_SIZE);
    for pair in state.gift_rank.windows(2) {
        prop_assert!(pair[0].total_value >= pair[1].total_value, "rank not sorted: {:?}", state.gift_rank);
    }
    for entry in &state.gift_rank {
        let total = state.senders.get(&entry.user_id).map(|t| t.total_value);
        prop_assert_eq!(total, Some(entry.total_value), "rank entry of {} is not its total", entry.user_id);
    }
    prop_assert_eq!(&state.gift_rank, &model.rank());
    Ok(())
}

/// Replays `changes` on the member and sender rows of `prev` (as the storage does) and checks
/// they give the rows of `next`, each change changing something.
fn check_changes(
    prev: Option<&RoomState>,
    next: &RoomState,
    changes: &[Change],
) -> Result<(), TestCaseError> {
    let mut members: BTreeMap<UserId, i64> = prev
        .map(|s| s.members.iter().map(|(id, m)| (id.clone(), m.joined_at_ms)).collect())
        .unwrap_or_default();
    let mut senders: BTreeMap<UserId, SenderTotal> =
        prev.map(|s| s.senders.iter().map(|(id, t)| (id.clone(), *t)).collect()).unwrap_or_default();
    for change in changes {
        match change {
            Change::MemberJoined { user_id, joined_at_ms } => {
                prop_assert!(
                    members.insert(user_id.clone(), *joined_at_ms).is_none(),
                    "{user_id} was a member"
                );
            }
            Change::MemberLeft { user_id } => {
                prop_assert!(members.remove(user_id).is_some(), "{user_id} was not a member");
            }
            Change::MembersCleared => {
                prop_assert_eq!(next.status, RoomStatus::Closed, "members cleared in an open room");
                members.clear();
            }
            Change::SenderTotal { user_id, total } => {
                let before = senders.insert(user_id.clone(), *total).map_or(0, |t| t.total_value);
                prop_assert!(total.total_value > before, "{user_id}'s total did not grow");
            }
        }
    }
    let next_members: BTreeMap<UserId, i64> =
        next.members.iter().map(|(id, m)| (id.clone(), m.joined_at_ms)).collect();
    let next_senders: BTreeMap<UserId, SenderTotal> =
        next.senders.iter().map(|(id, t)| (id.clone(), *t)).collect();
    prop_assert_eq!(members, next_members, "changes do not replay to the new members");
    prop_assert_eq!(senders, next_senders, "changes do not replay to the new sender totals");
    Ok(())
}

/// Checks the events of an applied command against the command and the state diff.
fn check_events(
    prev: Option<&RoomState>,
    command: &Command,
    applied: &Applied,
    now_ms: i64,
) -> Result<(), TestCaseError> {
    let next = &applied.state;
    let types: Vec<EventType> = applied.events.iter().map(|e| e.event_type).collect();
    let payload = |i: usize| &applied.events[i].payload;
    match command {
        Command::CreateRoom { .. } => prop_assert_eq!(types, vec![EventType::RoomCreated]),
        Command::JoinRoom { user_id } => {
            prop_assert_eq!(types, vec![EventType::RoomUserJoined]);
            prop_assert_eq!(&payload(0)["user_id"], user_id.as_str());
            prop_assert_eq!(&payload(0)["joined_at_ms"], now_ms);
            prop_assert_eq!(&payload(0)["member_count"], next.members.len());
        }
        Command::LeaveRoom { user_id, reason } => {
            prop_assert_eq!(types, vec![EventType::RoomUserLeft]);
            prop_assert_eq!(&payload(0)["user_id"], user_id.as_str());
            prop_assert_eq!(&payload(0)["reason"], &serde_json::to_value(reason).unwrap());
            prop_assert_eq!(&payload(0)["member_count"], next.members.len());
        }
        Command::SendGift { count, unit_value, .. } => {
            let prev = prev.expect("a gift needs a room");
            let value = u64::from(*count) * u64::from(*unit_value);
            let order = |rank: &[RankEntry]| rank.iter().map(|e| e.user_id.clone()).collect::<Vec<_>>();
            let mut want = vec![EventType::RoomGiftSent, EventType::RoomHeatChanged];
            if order(&prev.gift_rank) != order(&next.gift_rank) {
                want.push(EventType::RoomRankChanged);
                prop_assert_eq!(&payload(2)["gift_rank"], &serde_json::to_value(&next.gift_rank).unwrap());
            }
            prop_assert_eq!(types, want);
            prop_assert_eq!(&payload(0)["total_value"], value);
            prop_assert_eq!(&payload(1)["heat"], next.heat);
            prop_assert_eq!(&payload(1)["delta"], value);
            prop_assert_eq!(next.heat - prev.heat, value as i64);
        }
        Command::CloseRoom => {
            prop_assert_eq!(types, vec![EventType::RoomClosed]);
            prop_assert_eq!(&payload(0)["members_removed"], prev.map_or(0, |s| s.members.len()));
        }
    }
    Ok(())
}

/// Runs `ops` from `start`, checking every step.
fn run_sequence(start: &Start, ops: &[Op]) -> Result<(), TestCaseError> {
    let mut state = start_state(start);
    let mut model = state.as_ref().map(Model::of);
    if let (Some(state), Some(model)) = (&state, &model) {
        check_state(state, model)?;
    }
    for (step, op) in ops.iter().enumerate() {
        let command = match command(op) {
            Ok(command) => command,
            Err(e) => {
                // Refused at the boundary: the id rules, nothing reaches the room.
                let bad = raw_ids(op).into_iter().find(|s| !is_valid_name(s));
                prop_assert!(bad.is_some(), "{op:?} refused ({e}) with only valid ids");
                continue;
            }
        };
        for id in raw_ids(op) {
            prop_assert!(is_valid_name(id), "{id:?} accepted as an id");
        }
        let ctx = ctx(step + 1);
        let before = state.clone();
        let result = apply(state.as_ref(), &command, &ctx);
        prop_assert_eq!(&state, &before, "apply changed its input");
        let (want, next_model) = Model::step(model.as_ref(), &command, ctx.now_ms);
        if state.as_ref().is_some_and(|s| s.status == RoomStatus::Closed) {
            prop_assert_eq!(&result, &Err(DomainError::RoomClosed), "a closed room took {:?}", command);
        }
        match (&result, &want) {
            (Err(got), Outcome::Refused(want)) => {
                prop_assert!(
                    same_refusal(got, want),
                    "step {step} {command:?}: refused {got:?}, want {want:?}"
                );
            }
            (Ok(applied), Outcome::NoOp) => {
                prop_assert!(!applied.applied, "step {step} {command:?}: applied, want a no-op");
                prop_assert_eq!(Some(&applied.state), state.as_ref(), "a no-op changed the state");
                prop_assert!(applied.events.is_empty() && applied.changes.is_empty());
            }
            (Ok(applied), Outcome::Applied) => {
                prop_assert!(applied.applied, "step {step} {command:?}: not applied");
                let prev_version = state.as_ref().map_or(0, |s| s.version);
                prop_assert_eq!(applied.state.version, prev_version + 1, "version must grow by one");
                check_events(state.as_ref(), &command, applied, ctx.now_ms)?;
                check_changes(state.as_ref(), &applied.state, &applied.changes)?;
            }
            (got, want) => {
                return Err(TestCaseError::fail(format!(
                    "step {step} {command:?}: got {got:?}, want {want:?}"
                )));
            }
        }
        if let Ok(applied) = result {
            state = Some(applied.state);
        }
        model = next_model;
        prop_assert_eq!(state.is_some(), model.is_some());
        if let (Some(state), Some(model)) = (&state, &model) {
            check_state(state, model)?;
        }
    }
    Ok(())
}

/// A raw user id: mostly from [`POOL`], sometimes any valid id, sometimes an invalid string.
fn raw_user() -> impl Strategy<Value = String> {
    prop_oneof![
        40 => select(POOL.as_slice()).prop_map(str::to_owned),
        1 => "[A-Za-z0-9_.-]{1,64}",
        1 => any::<String>(),
        1 => select(vec!["", "bad id", "a\r\nb", "nul\0", "房间", "yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy"])
            .prop_map(str::to_owned),
    ]
}

/// A gift count or unit value: mostly in `1..=max` (small values often, so totals tie in the
/// rank), often on or past either edge.
fn amount(max: u32) -> impl Strategy<Value = u32> {
    prop_oneof![
        6 => 1..=3u32,
        6 => 1..=max,
        1 => select(vec![0, 1, max, max + 1, u32::MAX]),
        1 => any::<u32>(),
    ]
}

/// A title: valid, empty, near the length limit, or with control characters.
fn title() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[A-Za-z0-9 ]{1,20}",
        1 => Just(String::new()),
        1 => "\\PC{120,135}",
        1 => "[a-z\\r\\n\\t\\x00\\x7f]{1,10}",
        1 => any::<String>(),
    ]
}

/// One raw command, gifts most likely, a close seldom (so sequences go on after it for a while).
fn op() -> impl Strategy<Value = Op> {
    let reason = select(vec![LeaveReason::User, LeaveReason::Stale, LeaveReason::Closed]);
    let gift = prop_oneof![8 => Just("rose".to_owned()), 1 => raw_user()];
    prop_oneof![
        2 => (raw_user(), title()).prop_map(|(owner, title)| Op::Create { owner, title }),
        12 => raw_user().prop_map(|user| Op::Join { user }),
        4 => (raw_user(), reason).prop_map(|(user, reason)| Op::Leave { user, reason }),
        30 => (raw_user(), raw_user(), gift, amount(MAX_GIFT_COUNT), amount(MAX_UNIT_VALUE)).prop_map(
            |(sender, receiver, gift, count, unit_value)| Op::Gift { sender, receiver, gift, count, unit_value }
        ),
        1 => Just(Op::Close),
    ]
}

/// Where a sequence starts.
fn start() -> impl Strategy<Value = Start> {
    prop_oneof![
        1 => Just(Start::Missing),
        2 => Just(Start::Fresh),
        2 => Just(Start::Busy),
        2 => (1..=(1u64 << 40), 0..=20_000_000_000u64).prop_map(|(version, gap)| Start::Hot { version, gap }),
    ]
}

/// Any room state, consistent or not: members and senders from the pool, any totals, heat,
/// version (within the `BIGINT` the store keeps it in) and rank.
fn any_state() -> impl Strategy<Value = RoomState> {
    let user = || select(POOL.as_slice()).prop_map(|u| UserId::parse(u).unwrap());
    (
        any::<bool>(),
        vec((user(), any::<i64>()), 0..8),
        any::<i64>(),
        vec((user(), any::<u64>(), any::<u64>()), 0..14),
        vec((user(), any::<u64>()), 0..14),
        0..=i64::MAX as u64,
    )
        .prop_map(|(closed, members, heat, senders, rank, version)| {
            let mut state = start_state(&Start::Fresh).unwrap();
            state.status = if closed { RoomStatus::Closed } else { RoomStatus::Open };
            for (id, at) in members {
                let member = super::Member { joined_at_ms: at, last_heartbeat_ms: at };
                state.members.insert(id, member);
            }
            state.heat = heat;
            for (id, total_value, first_version) in senders {
                state.senders.insert(id, SenderTotal { total_value, first_version });
            }
            state.gift_rank =
                rank.into_iter().map(|(user_id, total_value)| RankEntry { user_id, total_value }).collect();
            state.version = version;
            state
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Every step of an arbitrary sequence does what the model says and keeps every invariant.
    #[test]
    fn sequences_match_the_model_and_keep_the_invariants(start in start(), ops in vec(op(), 1..100)) {
        run_sequence(&start, &ops)?;
    }

    /// `apply` never panics, whatever the state (even an inconsistent one) and command; an
    /// applied command moves the version by one, a refused one leaves the input as it was.
    #[test]
    fn apply_never_panics(state in any_state(), op in op(), missing in any::<bool>()) {
        let Ok(command) = command(&op) else { return Ok(()) };
        let input = (!missing).then_some(&state);
        match apply(input, &command, &ctx(1)) {
            Ok(applied) if applied.applied => {
                prop_assert_eq!(applied.state.version, input.map_or(1, |s| s.version + 1));
            }
            Ok(applied) => prop_assert_eq!(Some(&applied.state), input),
            Err(_) => {}
        }
    }
}
