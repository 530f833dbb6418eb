//! What the events API reads the database for, cached on this node and coalesced: each room's
//! version (reused for [`VERSION_TTL`]) and its history in aligned blocks of [`BLOCK`] versions
//! (a block below the room's version is final and kept until the byte bound evicts it; the
//! newest is read again when the room's version moved). Concurrent misses of one key are one
//! query (quick_cache's placeholder: the others wait for its value), and at most
//! `rooms.history.max_db_reads` queries of this module run at once.

use std::sync::Arc;
use std::time::Duration;

use quick_cache::Weighter;
use quick_cache::sync::Cache;
use serde_json::value::RawValue;
use tokio::sync::Semaphore;
use tokio::time::Instant;

use super::{BLOCK, VERSION_TTL};
use crate::config::HistorySettings;
use crate::domain::RoomId;
use crate::store::{HistoryEvent, SharedCommandStore};
use crate::telemetry::names;

use super::super::error::RoomError;

/// Rooms whose version is remembered at most (each a few dozen bytes).
const VERSIONS: usize = 16_384;
/// A version asked for [`Fresh::Now`] is at most this old.
const NOW_TTL: Duration = Duration::from_millis(10);

/// How fresh a room's version must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Fresh {
    /// Read within [`VERSION_TTL`].
    Recent,
    /// Read within [`NOW_TTL`]: the page would be empty, or asks past the version known.
    Now,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct VersionKey {
    room: RoomId,
    fresh: Fresh,
    /// The time slot (of the freshness's length) the value was read in: a later slot is
    /// another key, so an entry is never used past its time and needs no expiry.
    slot: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct BlockKey {
    room: RoomId,
    index: u64,
    /// The newest version the block was read up to: its end, or the room's version when that
    /// is inside it (the newest block is read again once the room moved on).
    up_to: u64,
}

/// The IM events of a room with versions in `index·BLOCK+1 ..= up_to`, as far as they are kept.
#[derive(Debug)]
pub(super) struct Block {
    /// Version order; a version may be missing (never written to the history, or deleted).
    rows: Vec<Row>,
    /// The last version of the block's range.
    end: u64,
}

#[derive(Debug)]
struct Row {
    version: u64,
    envelope: Arc<RawValue>,
    /// When it was committed, on this process's clock (its age on the database clock when read).
    committed: Instant,
}

impl Block {
    /// How long ago `version` was committed, when the block holds it.
    pub(super) fn age_of(&self, version: u64) -> Option<Duration> {
        let at = self.rows.binary_search_by_key(&version, |r| r.version).ok()?;
        Some(self.rows[at].committed.elapsed())
    }

    /// Appends to `events` the block's envelopes that follow `next_after` consecutively, up to
    /// `up_to`, moving `next_after` along; true when it reached the block's end (the page may
    /// go on in the next block).
    pub(super) fn extend(&self, events: &mut Vec<Arc<RawValue>>, next_after: &mut u64, up_to: u64) -> bool {
        let start = self.rows.partition_point(|r| r.version <= *next_after);
        for row in &self.rows[start..] {
            if row.version != *next_after + 1 || row.version > up_to {
                break;
            }
            events.push(Arc::clone(&row.envelope));
            *next_after = row.version;
        }
        *next_after == self.end
    }

    fn bytes(&self) -> u64 {
        self.rows.iter().map(|r| r.envelope.get().len() as u64 + 64).sum::<u64>() + 64
    }
}

#[derive(Debug, Clone, Copy)]
struct BlockBytes;

impl Weighter<BlockKey, Arc<Block>> for BlockBytes {
    fn weight(&self, key: &BlockKey, block: &Arc<Block>) -> u64 {
        key.room.as_str().len() as u64 + block.bytes()
    }
}

/// The events API's caches over the database, and the bound on its queries.
pub(super) struct Caches {
    repo: SharedCommandStore,
    versions: Cache<VersionKey, Option<u64>>,
    blocks: Cache<BlockKey, Arc<Block>, BlockBytes>,
    queries: Semaphore,
    started: Instant,
}

impl Caches {
    pub(super) fn new(repo: SharedCommandStore, settings: &HistorySettings) -> Self {
        // A block of 100 typical envelopes is some 40 KB.
        let blocks = (settings.cache_bytes / 40_000).max(16) as usize;
        Self {
            repo,
            versions: Cache::new(VERSIONS),
            blocks: Cache::with_weighter(blocks, settings.cache_bytes.max(1), BlockBytes),
            queries: Semaphore::new(settings.max_db_reads.max(1) as usize),
            started: Instant::now(),
        }
    }

    /// The room's version (`None`: no such room), at most as old as `fresh` says.
    pub(super) async fn version(&self, room: &RoomId, fresh: Fresh) -> Result<Option<u64>, RoomError> {
        let ttl = match fresh {
            Fresh::Recent => VERSION_TTL,
            Fresh::Now => NOW_TTL,
        };
        let slot = (self.started.elapsed().as_millis() / ttl.as_millis().max(1)) as u64;
        let key = VersionKey { room: room.clone(), fresh, slot };
        match self.versions.get_value_or_guard_async(&key).await {
            Ok(version) => Ok(version),
            Err(guard) => {
                let version = {
                    let _permit = self.permit().await;
                    count("version");
                    self.repo.room_version(room.as_str()).await?
                };
                let _ = guard.insert(version);
                Ok(version)
            }
        }
    }

    /// Block `index` of the room, read up to the room's `version` at most.
    pub(super) async fn block(
        &self,
        room: &RoomId,
        index: u64,
        version: u64,
    ) -> Result<Arc<Block>, RoomError> {
        let end = (index + 1).saturating_mul(BLOCK);
        let key = BlockKey { room: room.clone(), index, up_to: end.min(version) };
        match self.blocks.get_value_or_guard_async(&key).await {
            Ok(block) => Ok(block),
            Err(guard) => {
                let rows = {
                    let _permit = self.permit().await;
                    count("block");
                    self.repo.room_events_after(room.as_str(), index * BLOCK, key.up_to).await?
                };
                let block =
                    Arc::new(Block { rows: rows.into_iter().map(row).collect::<Result<_, _>>()?, end });
                let _ = guard.insert(Arc::clone(&block));
                Ok(block)
            }
        }
    }

    async fn permit(&self) -> tokio::sync::SemaphorePermit<'_> {
        // Never closed: the semaphore lives as long as the caches.
        self.queries.acquire().await.unwrap_or_else(|_| unreachable!("the read semaphore is never closed"))
    }
}

fn row(event: HistoryEvent) -> Result<Row, RoomError> {
    let envelope = RawValue::from_string(event.envelope)
        .map_err(|e| RoomError::Corrupt(format!("a stored event envelope is not JSON: {e}")))?;
    let now = Instant::now();
    Ok(Row {
        version: event.room_version,
        envelope: Arc::from(envelope),
        committed: now.checked_sub(event.age).unwrap_or(now),
    })
}

fn count(kind: &'static str) {
    metrics::counter!(names::HISTORY_QUERIES_TOTAL, names::LABEL_KIND => kind).increment(1);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(versions: &[u64], end: u64) -> Block {
        let rows = versions
            .iter()
            .map(|&version| Row {
                version,
                envelope: Arc::from(RawValue::from_string(format!("{{\"v\":{version}}}")).unwrap()),
                committed: Instant::now(),
            })
            .collect();
        Block { rows, end }
    }

    #[test]
    fn a_block_extends_a_page_consecutively_and_says_when_it_ran_out() {
        let b = block(&[101, 102, 103, 105], 200);
        let (mut events, mut next) = (Vec::new(), 101);
        assert!(!b.extend(&mut events, &mut next, 300), "stops at the gap before 105");
        assert_eq!((events.len(), next), (2, 103));
        let full = block(&(1..=100).collect::<Vec<_>>(), 100);
        let (mut events, mut next) = (Vec::new(), 0);
        assert!(full.extend(&mut events, &mut next, 300), "reached its end: the page goes on");
        assert_eq!((events.len(), next), (100, 100));
        let (mut events, mut next) = (Vec::new(), 10);
        assert!(!full.extend(&mut events, &mut next, 15), "stops at up_to");
        assert_eq!((events.len(), next), (5, 15));
        assert_eq!(full.age_of(7).map(|a| a < Duration::from_secs(1)), Some(true));
        assert_eq!(b.age_of(104), None);
    }
}
