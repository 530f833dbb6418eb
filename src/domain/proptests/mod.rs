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

mod check;
mod moderation;
mod seats;
mod strategies;

use check::{command, ctx, run_sequence};
use strategies::{any_state, op, start};

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
            Command::CloseRoom { .. } => {
                next.status = RoomStatus::Closed;
                next.members.clear();
            }
            other => panic!("the sequences generate members' commands only, not {other:?}"),
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
