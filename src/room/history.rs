//! The rooms' event history (SPEC §13.2): what a client that missed IM messages reads to catch
//! up — a room's IM events after a version, exactly the envelopes IM received, in order and
//! consecutive, or `recovered: false` when the versions right after it are no longer kept.
//!
//! Served from the outbox rows (each IM event's row carries its `room_version`; one range scan
//! of `idx_room_outbox_history`), so any node answers, and never under a room's commit lock: a
//! burst of reconnecting viewers costs reads, not room throughput. What is kept is each room's
//! most recent `rooms.history.max_events` IM events younger than `rooms.history.max_age`
//! (outbox retention never deletes younger rows).

use crate::config::HistorySettings;
use crate::domain::{DomainError, RoomId};
use crate::store::SharedCommandStore;

use super::error::RoomError;

/// Default page size of the events API.
pub const DEFAULT_EVENTS_LIMIT: u32 = 100;
/// Largest page of the events API.
pub const MAX_EVENTS_LIMIT: u32 = 300;

/// One page of a room's event history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventPage {
    /// The room's version now.
    pub room_version: u64,
    /// False when the versions right after the asked one are no longer kept: the client
    /// reloads the room's state and follows on from its version.
    pub recovered: bool,
    /// The envelopes (JSON, as IM received them), versions `after+1 ..= next_after`.
    pub events: Vec<String>,
    /// The last version in `events`; the asked one when there are none.
    pub next_after: u64,
}

/// Reads pages of the rooms' event history.
pub(super) struct History {
    repo: SharedCommandStore,
    settings: HistorySettings,
}

impl History {
    pub(super) fn new(repo: SharedCommandStore, settings: HistorySettings) -> Self {
        Self { repo, settings }
    }

    /// The room's IM events after version `after`, at most `limit` (1..=[`MAX_EVENTS_LIMIT`]).
    pub(super) async fn page(
        &self,
        room_id: &RoomId,
        after: u64,
        limit: u32,
    ) -> Result<EventPage, RoomError> {
        if !(1..=MAX_EVENTS_LIMIT).contains(&limit) {
            return Err(invalid("limit", format!("must be an integer from 1 to {MAX_EVENTS_LIMIT}")));
        }
        let Some(version) = self.repo.room_version(room_id.as_str()).await? else {
            return Err(DomainError::RoomNotFound.into());
        };
        if after > version {
            return Err(invalid("after_version", format!("{after} is past the room's version {version}")));
        }
        // Version 1 (the creation) has no IM event: after 0 starts at version 2.
        let from = after.max(1);
        let none =
            |recovered| EventPage { room_version: version, recovered, events: Vec::new(), next_after: after };
        if from >= version {
            return Ok(none(true));
        }
        // Kept: the most recent max_events IM events, versions above version - max_events.
        if from < version.saturating_sub(self.settings.max_events) {
            return Ok(none(false));
        }
        let rows = self
            .repo
            .room_events_after(room_id.as_str(), from, version, self.settings.max_age, limit)
            .await?;
        let mut events = Vec::with_capacity(rows.len());
        let mut next_after = from;
        for (row_version, envelope) in rows {
            if row_version != next_after + 1 {
                break;
            }
            events.push(envelope);
            next_after = row_version;
        }
        if events.is_empty() {
            // The event right after is older than max_age (or was written before the history
            // was kept): not kept.
            return Ok(none(false));
        }
        Ok(EventPage { room_version: version, recovered: true, events, next_after })
    }
}

fn invalid(field: &'static str, reason: String) -> RoomError {
    DomainError::InvalidArgument { field, reason }.into()
}
