//! What one caller may cost the others, checked by both APIs before a request costs anything
//! else (docs/CONFIG.md, `rooms.*`):
//!
//! - the members listing, metered per reader as the events API is
//!   (`rooms.members.reads_per_sec_per_client`, the same [`ReadLimiter`]), a page counted by
//!   its size, at the node the reader reached (where its address is known): a read forwarded
//!   to the room's owner is not counted again there;
//! - the open rooms one user may own at once (`rooms.max_open_per_owner`), counted in the
//!   database, so rooms owned on other nodes count too.

use std::net::IpAddr;
use std::sync::Arc;

use ::http::StatusCode;

use super::error::ApiError;
use super::read_limit::{OverLimit, ReadApi, ReadLimiter};
use super::rooms::DEFAULT_MEMBERS_LIMIT;
use crate::auth::Caller;
use crate::config::RoomsSettings;
use crate::domain::{RoomId, UserId};
use crate::store::CommandStore;

/// The per-caller bounds of the room API; [`Bounds::default`] bounds nothing.
#[derive(Debug, Clone, Default)]
pub struct Bounds {
    /// Each reader's share of the members listing; `None`: no limit.
    pub members_reads: Option<Arc<ReadLimiter>>,
    /// Open rooms one user may own at once; 0: no limit.
    pub max_open_per_owner: u32,
}

impl Bounds {
    /// The bounds `rooms` configures.
    pub fn new(rooms: &RoomsSettings) -> Self {
        Self {
            members_reads: ReadLimiter::new(ReadApi::Members, rooms.members_reads_per_sec_per_client)
                .map(Arc::new),
            max_open_per_owner: rooms.max_open_per_owner,
        }
    }

    /// Takes a members read of a page of up to `limit` members by `caller` from `peer`: one
    /// read per [`DEFAULT_MEMBERS_LIMIT`] members asked (a page's bytes are bounded by its
    /// members: an entry is a user id and a time), or 429 `rate_limited` naming the limit.
    pub fn meter_members(&self, caller: &Caller, peer: Option<IpAddr>, limit: usize) -> Result<(), ApiError> {
        let Some(reads) = &self.members_reads else { return Ok(()) };
        let cost = u32::try_from(limit.div_ceil(DEFAULT_MEMBERS_LIMIT)).unwrap_or(u32::MAX);
        reads.check_n(caller, peer, cost).map_err(|over| members_limited(&over))
    }

    /// Refuses the creation of `room_id` for `owner` when `caller` is not a service and
    /// `owner` already owns [`Self::max_open_per_owner`] open rooms besides it (the room itself
    /// is not counted, so a retried creation still replays): 409 `too_many_rooms`, naming the
    /// limit. One query on the owner's index; concurrent creations by one owner may each pass
    /// before the others commit (docs/CONFIG.md).
    pub async fn check_open_rooms(
        &self,
        store: &dyn CommandStore,
        caller: &Caller,
        room_id: &RoomId,
        owner: &UserId,
    ) -> Result<(), ApiError> {
        let exempt = match caller {
            Caller::Service(_) => true,
            Caller::User(_) | Caller::Anonymous => false,
        };
        if exempt || self.max_open_per_owner == 0 {
            return Ok(());
        }
        let open = store.open_rooms_owned(owner.as_str(), room_id.as_str()).await?;
        if open < u64::from(self.max_open_per_owner) {
            return Ok(());
        }
        Err(ApiError::new(
            StatusCode::CONFLICT,
            "too_many_rooms",
            format!(
                "owner_id: {owner} already owns {open} open rooms, the most rooms.max_open_per_owner ({}) allows; \
                 close one first",
                self.max_open_per_owner
            ),
        ))
    }
}

/// The 429 of a members read over its reader's share.
fn members_limited(over: &OverLimit) -> ApiError {
    ApiError::rate_limited(
        format!(
            "more than {} members reads per second from this reader (rooms.members.reads_per_sec_per_client; a \
             page counts one read per {DEFAULT_MEMBERS_LIMIT} members asked); retry after {} ms",
            over.per_sec,
            over.retry_after.as_millis()
        ),
        over.retry_after,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bounds(per_sec: u32) -> Bounds {
        Bounds {
            members_reads: ReadLimiter::new(ReadApi::Members, per_sec).map(Arc::new),
            max_open_per_owner: 0,
        }
    }

    #[test]
    fn a_members_page_costs_one_read_per_hundred_members_asked() {
        let bounds = bounds(10);
        let peer = Some("10.0.0.7".parse().unwrap());
        // A page of 1000 is the whole second's share.
        bounds.meter_members(&Caller::Anonymous, peer, 1000).expect("within the burst");
        let refused = bounds.meter_members(&Caller::Anonymous, peer, 1).expect_err("over the share");
        assert_eq!((refused.status, refused.code.as_ref()), (StatusCode::TOO_MANY_REQUESTS, "rate_limited"));
        assert!(refused.message.contains("rooms.members.reads_per_sec_per_client"), "{}", refused.message);
        assert_eq!(refused.retry_after, Some(1));
        // Ten default pages are the same share.
        let other = Some("10.0.0.8".parse().unwrap());
        for _ in 0..10 {
            bounds.meter_members(&Caller::Anonymous, other, DEFAULT_MEMBERS_LIMIT).expect("one read each");
        }
        assert!(bounds.meter_members(&Caller::Anonymous, other, 1).is_err());
        // No limit configured: nothing refused.
        for _ in 0..100 {
            Bounds::default().meter_members(&Caller::Anonymous, peer, 1000).expect("no limit");
        }
    }
}
