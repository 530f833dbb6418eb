//! The service's reads (the room's snapshot, its members) and heartbeats, served from the cells,
//! and what they leave behind: nothing, for a room that does not exist. Such a room is answered
//! from the misses remembered lately ([`crate::room::cells::misses`]) without a cell or a database
//! read; otherwise a read holds the room's cell as a [`ReadCell`], which takes the cell away again
//! when the room turned out missing and nobody else uses it.

use tokio::time::Instant;

use super::error::RoomError;
use super::history::EventPage;
use super::service::RoomService;
use crate::domain::{
    Actor, DomainError, MemberView, RestrictionKind, Role, RoomId, RoomSnapshot, RoomState,
    StoredRestriction, UserId,
};
use crate::room::cells::cell_map::ReadCell;
use crate::room::presence::last_seen::Heartbeats;

impl RoomService {
    /// The room's IM events after version `after` (at most `limit`, 1..=300), from its event
    /// history: on any node, never under the room's commit lock (module `room::history`).
    pub async fn events(&self, room_id: &RoomId, after: u64, limit: u32) -> Result<EventPage, RoomError> {
        self.inner.history.page(room_id, after, limit).await
    }

    /// Refreshes a member's presence (memory only): [`Self::heartbeats`] of one member, a
    /// non-member refused with `not_member`.
    pub async fn heartbeat(&self, room_id: &RoomId, user_id: &UserId) -> Result<(), RoomError> {
        let beats = self.heartbeats(room_id, std::slice::from_ref(user_id)).await?;
        if beats.alive == 0 {
            return Err(DomainError::NotMember { user_id: user_id.to_string() }.into());
        }
        Ok(())
    }

    /// Refreshes the presence of members of a room (memory only; a repeated id counts once)
    /// and says which ids are not members. Never waits for a commit: presence lives outside
    /// the lock the room's drain holds while it commits. Only a cell not loaded yet (or loaded
    /// under another shard lease epoch) takes the lock, to load the room.
    pub async fn heartbeats(&self, room_id: &RoomId, user_ids: &[UserId]) -> Result<Heartbeats, RoomError> {
        let fence = self.inner.options.ownership.fence(room_id.as_str()).map_err(|_| RoomError::NotOwner)?;
        let cell = self.read_cell(room_id).ok_or(DomainError::RoomNotFound)?;
        if let Some(beats) = cell.presence.touch(fence.unwrap_or(0), user_ids, (self.inner.clock)()) {
            return Ok(beats?);
        }
        let mut guard = cell.state.lock().await;
        let fence = self.inner.fence(room_id, &cell, &mut guard)?;
        let generation = self.inner.misses.generation();
        if self.inner.loaded(room_id, &cell, &mut guard).await?.is_none() {
            self.inner.misses.remember(room_id, generation, Instant::now());
        }
        let beats = cell.presence.touch(fence.unwrap_or(0), user_ids, (self.inner.clock)());
        drop(guard);
        Ok(beats.ok_or(RoomError::NotOwner)??)
    }

    /// When a member was last seen (its last heartbeat, ms), if the room is loaded here and has
    /// them.
    pub fn last_seen(&self, room_id: &RoomId, user_id: &UserId) -> Option<i64> {
        self.inner.cells.find(room_id)?.presence.last_seen(user_id)
    }

    /// The room as committed (without its member list).
    pub async fn snapshot(&self, room_id: &RoomId) -> Result<RoomSnapshot, RoomError> {
        Ok(self.room(room_id).await?.snapshot())
    }

    /// The room as committed, for its seats and pending seat requests.
    pub async fn seats(&self, room_id: &RoomId) -> Result<RoomState, RoomError> {
        self.room(room_id).await
    }

    /// Up to `limit` members after `after` (exclusive), in user id order.
    pub async fn members(
        &self,
        room_id: &RoomId,
        after: Option<&UserId>,
        limit: usize,
    ) -> Result<Vec<MemberView>, RoomError> {
        Ok(self.room(room_id).await?.members_page(after, limit))
    }

    /// Up to about `limit` active mutes and bans (`kind`: one of them) after user `after`, in
    /// user id order, a user's entries never split over two pages, for `actor` (an admin at
    /// least; `None`: an anonymous caller under `auth.mode: none`). True when more follow.
    pub async fn moderation(
        &self,
        room_id: &RoomId,
        actor: Option<&Actor>,
        kind: Option<RestrictionKind>,
        after: Option<&UserId>,
        limit: usize,
    ) -> Result<(Vec<StoredRestriction>, bool), RoomError> {
        let room = self.room(room_id).await?;
        let now_ms = (self.inner.clock)();
        if let Some(actor) = actor {
            room.require(actor, Role::Admin, now_ms)?;
        }
        let kinds = match kind {
            Some(kind) => vec![kind],
            None => vec![RestrictionKind::Ban, RestrictionKind::Mute],
        };
        // Each kind's first `limit + 1` in force, merged by user: enough to fill the page and
        // tell whether more follow.
        let mut merged: Vec<StoredRestriction> = kinds
            .into_iter()
            .flat_map(|kind| {
                room.restrictions_page(kind, now_ms, after, limit.saturating_add(1))
                    .into_iter()
                    .map(move |(u, r)| (kind, u, r))
            })
            .collect();
        merged.sort_by(|a, b| (&a.1, a.0).cmp(&(&b.1, b.0)));
        // Never sized by the caller's number: the page holds at most what was merged.
        let mut page = Vec::with_capacity(limit.min(merged.len()));
        let mut more = false;
        for entry in merged {
            let same_user = page.last().is_some_and(|last: &StoredRestriction| last.1 == entry.1);
            if page.len() >= limit && !same_user {
                more = true;
                break;
            }
            page.push(entry);
        }
        Ok((page, more))
    }

    /// A copy of the room as committed (O(1): its maps are persistent).
    async fn room(&self, room_id: &RoomId) -> Result<RoomState, RoomError> {
        self.inner.options.ownership.fence(room_id.as_str()).map_err(|_| RoomError::NotOwner)?;
        let cell = self.read_cell(room_id).ok_or(DomainError::RoomNotFound)?;
        let mut guard = cell.state.lock().await;
        self.inner.fence(room_id, &cell, &mut guard)?;
        let generation = self.inner.misses.generation();
        let room = self.inner.loaded(room_id, &cell, &mut guard).await?.map(|room| room.clone());
        drop(guard);
        room.ok_or_else(|| {
            self.inner.misses.remember(room_id, generation, Instant::now());
            DomainError::RoomNotFound.into()
        })
    }

    /// The cell a read or heartbeat of `room_id` uses (marked used), made when missing; `None`
    /// when the room has no cell and was found missing lately. Called once this node is known
    /// to own the room (a miss says nothing of whose room it is).
    fn read_cell<'a>(&'a self, room_id: &'a RoomId) -> Option<ReadCell<'a>> {
        let cells = &self.inner.cells;
        if cells.find(room_id).is_none() && self.inner.misses.contains(room_id, Instant::now()) {
            return None;
        }
        Some(ReadCell::new(cells, room_id, self.cell(room_id)))
    }
}
