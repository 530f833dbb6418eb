//! The generators: ops, start states and arbitrary (even inconsistent) room states.

use super::check::start_state;
use super::*;

/// A raw user id: mostly from [`POOL`], sometimes any valid id, sometimes an invalid string.
pub(super) fn raw_user() -> impl Strategy<Value = String> {
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
pub(super) fn amount(max: u32) -> impl Strategy<Value = u32> {
    prop_oneof![
        6 => 1..=3u32,
        6 => 1..=max,
        1 => select(vec![0, 1, max, max + 1, u32::MAX]),
        1 => any::<u32>(),
    ]
}

/// A title: valid, empty, near the length limit, or with control characters.
pub(super) fn title() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[A-Za-z0-9 ]{1,20}",
        1 => Just(String::new()),
        1 => "\\PC{120,135}",
        1 => "[a-z\\r\\n\\t\\x00\\x7f]{1,10}",
        1 => any::<String>(),
    ]
}

/// One raw command, gifts most likely, a close seldom (so sequences go on after it for a while).
pub(super) fn op() -> impl Strategy<Value = Op> {
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
pub(super) fn start() -> impl Strategy<Value = Start> {
    prop_oneof![
        1 => Just(Start::Missing),
        2 => Just(Start::Fresh),
        2 => Just(Start::Busy),
        2 => (1..=(1u64 << 40), 0..=20_000_000_000u64).prop_map(|(version, gap)| Start::Hot { version, gap }),
    ]
}

/// Any room state, consistent or not: members and senders from the pool, any totals, heat,
/// version (within the `BIGINT` the store keeps it in) and rank.
pub(super) fn any_state() -> impl Strategy<Value = RoomState> {
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
                let member = crate::domain::Member { joined_at_ms: at };
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
