//! The rooms' event history (SPEC §13.2): what a client that missed IM messages reads to catch
//! up — a room's IM events after a version, exactly the envelopes IM received, in order and
//! consecutive, or `recovered: false` when the versions right after it are no longer kept.
//!
//! Served from the outbox rows (each IM event's row carries its `room_version`), so any node
//! answers, and never under a room's commit lock. What is kept is each room's most recent
//! `rooms.history.max_events` IM events younger than `rooms.history.max_age` (outbox retention
//! never deletes younger rows).
//!
//! Readers never compete with commits (issue #45: a reconnect herd is the recovery path
//! itself). A read costs the database nothing in the common case and a bounded amount in any
//! case, whatever the number of readers:
//!
//! - the history is read in aligned blocks of [`BLOCK`] versions ([`cache`]), one index range
//!   each (at most [`BLOCK`] rows, never a scan: the age of each row is answered, not filtered
//!   on), kept in a byte-bounded cache on this node (`rooms.history.cache_bytes`); a block
//!   below the room's version never changes, so it is read once;
//! - the room's version is kept for [`VERSION_TTL`] (a read never waits for a fresher one
//!   unless the page would be empty or its `after_version` is past it);
//! - concurrent misses of the same block or version are one query (the others wait for it);
//! - at most `rooms.history.max_db_reads` of these queries run at once on this node, so the
//!   writers always keep the rest of the pool.
//!
//! So per room and node the database sees at most a version query and a newest-block query per
//! [`VERSION_TTL`] (a few more when pages ask past it), plus each older block once.

mod cache;

use std::sync::Arc;
use std::time::Duration;

use serde_json::value::RawValue;

use crate::config::HistorySettings;
use crate::domain::{DomainError, RoomId};
use crate::store::SharedCommandStore;

use super::error::RoomError;
use cache::{Block, Caches, Fresh};

/// Default page size of the events API.
pub const DEFAULT_EVENTS_LIMIT: u32 = 100;
/// Largest page of the events API.
pub const MAX_EVENTS_LIMIT: u32 = 300;
/// Versions of a history block: the unit read from the database and cached.
pub const BLOCK: u64 = 100;
/// How long a room's version read for the events API is reused.
pub const VERSION_TTL: Duration = Duration::from_millis(100);

/// One page of a room's event history.
#[derive(Debug, Clone)]
pub struct EventPage {
    /// The room's version now (as of at most 100 ms ago: `VERSION_TTL`; never below
    /// `next_after`).
    pub room_version: u64,
    /// False when the versions right after the asked one are no longer kept: the client
    /// reloads the room's state and follows on from its version.
    pub recovered: bool,
    /// The envelopes (JSON, as IM received them), versions `after+1 ..= next_after`.
    pub events: Vec<Arc<RawValue>>,
    /// The last version in `events`; the asked one when there are none.
    pub next_after: u64,
}

/// Reads pages of the rooms' event history.
pub(super) struct History {
    settings: HistorySettings,
    caches: Caches,
}

impl History {
    pub(super) fn new(repo: SharedCommandStore, settings: HistorySettings) -> Self {
        Self { caches: Caches::new(repo, &settings), settings }
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
        let mut version = self.caches.version(room_id, Fresh::Recent).await?;
        if version.is_some_and(|v| after >= v) {
            // Nothing newer in what this node knows: ask the database whether there is now
            // (a client past the cached version saw newer events on IM).
            version = self.caches.version(room_id, Fresh::Now).await?;
        }
        let Some(version) = version else {
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
        let up_to = version.min(from + u64::from(limit));
        let mut events = Vec::with_capacity((up_to - from) as usize);
        let mut next_after = from;
        let mut index = from / BLOCK;
        while next_after < up_to {
            let block = self.caches.block(room_id, index, version).await?;
            if events.is_empty() && !self.first_is_kept(&block, next_after + 1) {
                // The event right after is gone, older than max_age, or was written before the
                // history was kept: not kept.
                return Ok(none(false));
            }
            if !block.extend(&mut events, &mut next_after, up_to) {
                break;
            }
            index += 1;
        }
        if events.is_empty() {
            return Ok(none(false));
        }
        Ok(EventPage { room_version: version, recovered: true, events, next_after })
    }

    /// True when `block` holds version `first` committed within `max_age`.
    fn first_is_kept(&self, block: &Block, first: u64) -> bool {
        block.age_of(first).is_some_and(|age| age <= self.settings.max_age)
    }
}

fn invalid(field: &'static str, reason: String) -> RoomError {
    DomainError::InvalidArgument { field, reason }.into()
}
