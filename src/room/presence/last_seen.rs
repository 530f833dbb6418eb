//! A room's presence: when each member was last seen (its last heartbeat, ms), kept beside the
//! room's state and outside the lock its drain holds across a commit, so a heartbeat never
//! waits for a commit.
//!
//! The map follows the room's membership, which changes only in the drain, under the cell's
//! lock, once a commit is swapped into memory: a join adds the member at its join time, a leave
//! removes it, a close empties the room. A load seeds every member at load time (a restart never
//! evicts everyone at once) and an unload clears it. A heartbeat takes the read side only and
//! moves one member's clock forward with an atomic; only a change of membership takes the write
//! side. Per member: the key and one `AtomicI64`.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::domain::{Change, DomainError, MemberChange, RoomState, RoomStatus, UserId};

/// The answer to heartbeats of members of one room.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Heartbeats {
    /// How many distinct ids are members (their clocks moved on).
    pub alive: usize,
    /// The distinct ids that are not members, in request order.
    pub unknown: Vec<UserId>,
}

/// One room's presence.
#[derive(Debug, Default)]
pub(in crate::room) struct LastSeen {
    /// `None` while the cell's state is not loaded.
    state: RwLock<Option<Loaded>>,
}

#[derive(Debug)]
struct Loaded {
    /// The shard lease epoch the cell's state was loaded under (0 without a cluster).
    epoch: u64,
    room: Room,
}

#[derive(Debug)]
enum Room {
    Missing,
    Closed,
    Open(HashMap<UserId, AtomicI64>),
}

impl Room {
    fn seeded(state: Option<&RoomState>, now_ms: i64) -> Self {
        match state {
            None => Room::Missing,
            Some(room) if room.status == RoomStatus::Closed => Room::Closed,
            Some(room) => {
                Room::Open(room.members.keys().map(|id| (id.clone(), AtomicI64::new(now_ms))).collect())
            }
        }
    }
}

impl LastSeen {
    fn read(&self) -> RwLockReadGuard<'_, Option<Loaded>> {
        self.state.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, Option<Loaded>> {
        self.state.write().unwrap_or_else(|e| e.into_inner())
    }

    /// The cell's state was loaded under `epoch`: every member is seen at `now_ms`.
    pub(in crate::room) fn seed(&self, epoch: u64, state: Option<&RoomState>, now_ms: i64) {
        *self.write() = Some(Loaded { epoch, room: Room::seeded(state, now_ms) });
    }

    /// The cell's state was unloaded.
    pub(in crate::room) fn clear(&self) {
        *self.write() = None;
    }

    /// A commit left the room as `state` after `changes`; the members it added are seen at
    /// their join time. Takes the write side only when the membership or the status changed.
    pub(in crate::room) fn committed(
        &self,
        epoch: u64,
        state: Option<&RoomState>,
        changes: &[Change],
        now_ms: i64,
    ) {
        let members_changed = changes.iter().any(|c| c.member().is_some());
        let open = state.is_some_and(|s| s.status == RoomStatus::Open);
        if !members_changed
            && open
            && self.read().as_ref().is_some_and(|l| l.epoch == epoch && matches!(l.room, Room::Open(_)))
        {
            return;
        }
        let mut guard = self.write();
        match guard.as_mut() {
            Some(Loaded { epoch: loaded, room: Room::Open(members) }) if *loaded == epoch && open => {
                for change in changes {
                    match change.member() {
                        Some(MemberChange::Joined(user_id, joined_at_ms)) => {
                            members.insert(user_id.clone(), AtomicI64::new(joined_at_ms));
                        }
                        Some(MemberChange::Left(user_id)) => {
                            members.remove(user_id);
                        }
                        Some(MemberChange::Cleared) => members.clear(),
                        None => {}
                    }
                }
            }
            _ => {
                // Created, closed, or not seeded under this epoch: from the state. A room just
                // created has only the members of this batch, seen when they joined.
                let room = match state {
                    Some(s) if s.status == RoomStatus::Open => Room::Open(
                        s.members
                            .iter()
                            .map(|(id, m)| (id.clone(), AtomicI64::new(m.joined_at_ms.max(now_ms))))
                            .collect(),
                    ),
                    other => Room::seeded(other, now_ms),
                };
                *guard = Some(Loaded { epoch, room });
            }
        }
    }

    /// Heartbeats of `user_ids` at `now_ms`, when the state is loaded under `epoch` (`None`
    /// otherwise: the caller loads it first). A closed room or a missing one is refused.
    pub(in crate::room) fn touch(
        &self,
        epoch: u64,
        user_ids: &[UserId],
        now_ms: i64,
    ) -> Option<Result<Heartbeats, DomainError>> {
        let guard = self.read();
        let loaded = guard.as_ref().filter(|l| l.epoch == epoch)?;
        let members = match &loaded.room {
            Room::Missing => return Some(Err(DomainError::RoomNotFound)),
            Room::Closed => return Some(Err(DomainError::RoomClosed)),
            Room::Open(members) => members,
        };
        let mut answer = Heartbeats::default();
        let mut seen: HashSet<&UserId> = HashSet::new();
        for user_id in user_ids {
            if user_ids.len() > 1 && !seen.insert(user_id) {
                continue;
            }
            match members.get(user_id) {
                Some(clock) => {
                    clock.fetch_max(now_ms, Ordering::Relaxed);
                    answer.alive += 1;
                }
                None => answer.unknown.push(user_id.clone()),
            }
        }
        Some(Ok(answer))
    }

    /// When `user_id` was last seen, if the room is loaded, open and has them.
    pub(in crate::room) fn last_seen(&self, user_id: &UserId) -> Option<i64> {
        match &self.read().as_ref()?.room {
            Room::Open(members) => members.get(user_id).map(|c| c.load(Ordering::Relaxed)),
            Room::Missing | Room::Closed => None,
        }
    }

    /// Members of a loaded open room last seen at or before `cutoff_ms`.
    pub(in crate::room) fn stale(&self, cutoff_ms: i64) -> Vec<UserId> {
        match self.read().as_ref().map(|l| &l.room) {
            Some(Room::Open(members)) => members
                .iter()
                .filter(|(_, c)| c.load(Ordering::Relaxed) <= cutoff_ms)
                .map(|(id, _)| id.clone())
                .collect(),
            _ => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{Command, CommandContext, CommandId, RoomId, apply};

    fn user(id: &str) -> UserId {
        UserId::parse(id).unwrap()
    }

    fn ctx(now_ms: i64) -> CommandContext {
        CommandContext {
            room_id: RoomId::parse("r").unwrap(),
            command_id: CommandId::parse("c").unwrap(),
            request_id: "t".into(),
            now_ms,
            max_admins: crate::domain::DEFAULT_MAX_ADMINS,
            seat_request_ttl_ms: crate::domain::DEFAULT_SEAT_REQUEST_TTL_MS,
            idle_close_after_ms: None,
        }
    }

    fn room(members: &[&str]) -> RoomState {
        let create =
            Command::CreateRoom { owner_id: user("o"), title: "t".into(), seats: Default::default() };
        let mut state = apply(None, &create, &ctx(1)).unwrap().state;
        for m in members {
            state = apply(Some(&state), &Command::JoinRoom { user_id: user(m) }, &ctx(10)).unwrap().state;
        }
        state
    }

    #[test]
    fn a_load_seeds_everyone_and_heartbeats_move_clocks_forward_only() {
        let seen = LastSeen::default();
        assert!(seen.touch(0, &[user("a")], 5).is_none(), "not loaded");
        seen.seed(0, Some(&room(&["a", "b"])), 100);
        assert!(seen.touch(1, &[user("a")], 5).is_none(), "loaded under another epoch");
        let beats = seen.touch(0, &[user("a"), user("x"), user("a"), user("x"), user("b")], 200).unwrap();
        assert_eq!(beats.unwrap(), Heartbeats { alive: 2, unknown: vec![user("x")] });
        seen.touch(0, &[user("a")], 150).unwrap().unwrap();
        assert_eq!(seen.last_seen(&user("a")), Some(200));
        assert_eq!(seen.stale(199), Vec::<UserId>::new());
        seen.clear();
        assert_eq!(seen.last_seen(&user("a")), None);
    }

    #[test]
    fn commits_add_and_remove_members_and_a_closed_or_missing_room_is_refused() {
        let seen = LastSeen::default();
        seen.seed(0, None, 1);
        assert_eq!(seen.touch(0, &[user("a")], 2), Some(Err(DomainError::RoomNotFound)));
        let state = room(&["a"]);
        seen.committed(0, Some(&state), &[Change::MemberJoined { user_id: user("a"), joined_at_ms: 10 }], 20);
        assert_eq!(seen.last_seen(&user("a")), Some(20));
        let joined = [Change::MemberJoined { user_id: user("b"), joined_at_ms: 30 }];
        seen.committed(0, Some(&room(&["a", "b"])), &joined, 30);
        assert_eq!(seen.stale(25), vec![user("a")]);
        assert_eq!(seen.last_seen(&user("b")), Some(30));
        seen.committed(0, Some(&room(&["b"])), &[Change::MemberLeft { user_id: user("a") }], 40);
        assert_eq!(seen.last_seen(&user("a")), None);
        let mut closed = room(&[]);
        closed.status = RoomStatus::Closed;
        seen.committed(0, Some(&closed), &[Change::MembersCleared], 50);
        assert_eq!(seen.touch(0, &[user("b")], 60), Some(Err(DomainError::RoomClosed)));
    }
}
