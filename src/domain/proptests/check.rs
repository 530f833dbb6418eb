//! The steps of a property test: building commands, running a sequence, and checking each
//! state, change list and event list against the model.

use super::*;

/// The id rule of room, user and gift ids, written from the documentation: 1–64 characters of
/// `[A-Za-z0-9_.-]`.
pub(super) fn is_valid_name(s: &str) -> bool {
    (1..=64).contains(&s.chars().count())
        && s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

/// Builds the command, or the id error a client would get for it at the boundary.
pub(super) fn command(op: &Op) -> Result<Command, IdError> {
    Ok(match op {
        Op::Create { owner, title } => Command::CreateRoom {
            owner_id: UserId::parse(owner.as_str())?,
            title: title.clone(),
            seats: Default::default(),
        },
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
        Op::Close => Command::CloseRoom { by: None, idle: false },
    })
}

/// The raw id strings of an op.
pub(super) fn raw_ids(op: &Op) -> Vec<&str> {
    match op {
        Op::Create { owner, .. } => vec![owner],
        Op::Join { user } | Op::Leave { user, .. } => vec![user],
        Op::Gift { sender, receiver, gift, .. } => vec![sender, receiver, gift],
        Op::Close => vec![],
    }
}

/// The context of step `step`: the clock moves on so `joined_at_ms` tells the steps apart.
pub(super) fn ctx(step: usize) -> CommandContext {
    CommandContext {
        room_id: RoomId::parse("room").unwrap(),
        command_id: CommandId::parse(format!("c{step}")).unwrap(),
        request_id: "req".into(),
        now_ms: 1_000 + step as i64,
        max_admins: crate::domain::DEFAULT_MAX_ADMINS,
        seat_request_ttl_ms: crate::domain::DEFAULT_SEAT_REQUEST_TTL_MS,
        idle_close_after_ms: None,
    }
}

/// The state a sequence starts from.
pub(super) fn start_state(start: &Start) -> Option<RoomState> {
    let create = Command::CreateRoom {
        owner_id: UserId::parse("owner").unwrap(),
        title: "Live".into(),
        seats: Default::default(),
    };
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
pub(super) fn check_state(state: &RoomState, model: &Model) -> Result<(), TestCaseError> {
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
pub(super) fn check_changes(
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
            Change::Restricted { .. }
            | Change::Lifted { .. }
            | Change::AttributeSet { .. }
            | Change::AttributeDeleted { .. }
            | Change::SeatPendingSet { .. }
            | Change::SeatPendingDropped { .. } => {
                prop_assert!(
                    false,
                    "a member's or gift command restricted someone or changed a seat request"
                );
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
pub(super) fn check_events(
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
        Command::CloseRoom { .. } => {
            prop_assert_eq!(types, vec![EventType::RoomClosed]);
            prop_assert_eq!(&payload(0)["members_removed"], prev.map_or(0, |s| s.members.len()));
        }
        other => prop_assert!(false, "the sequences generate members' commands only, not {other:?}"),
    }
    Ok(())
}

/// Runs `ops` from `start`, checking every step.
pub(super) fn run_sequence(start: &Start, ops: &[Op]) -> Result<(), TestCaseError> {
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
