//! The admin APIs' limiters (SPEC §14.2): Tencent counts its 200 calls a second per API, so each
//! group admin API ([`AdminApi`]) has an app-wide limiter of its own, apart from the one
//! `send_group_msg` takes, at the same `im_rate_limit.global_per_sec`.
//!
//! They are this node's own limiters: admin calls are rare (a room's creation, close and
//! moderation), so they take no share of the cluster's quota in Redis, and N nodes may call one
//! API at up to N × the rate together; a rate-limited answer then pauses the room's group (or
//! the app) as any other does.
//!
//! A call with a share (a room's creation: its owner) is admitted fairly between shares
//! ([`FairGate`]): one owner creating rooms by the hundred waits behind its own creations, not
//! in front of another owner's.

use super::clock::{self, DirectLimiter};
use super::fair::FairGate;
use super::limits::window_quota;
use crate::publish::AdminApi;

/// One limiter per admin API, in [`AdminApi::ALL`]'s order, each with the fair queue of its
/// shared calls.
#[derive(Debug)]
pub(super) struct AdminLimits {
    limiters: Vec<(AdminApi, DirectLimiter, FairGate)>,
}

impl AdminLimits {
    /// A limiter of `per_sec` calls in every sliding second for each API.
    pub(super) fn new(per_sec: u32) -> Self {
        let per_sec = per_sec.max(1);
        let burst = (per_sec / 20).max(1);
        let limiters = AdminApi::ALL
            .into_iter()
            .map(|api| (api, clock::direct(window_quota(per_sec, burst)), FairGate::default()))
            .collect();
        Self { limiters }
    }

    /// Waits for a permit of `api`'s limiter, on tokio's timer: in `share`'s turn when it has
    /// one ([`FairGate`]).
    pub(super) async fn acquire(&self, api: AdminApi, share: Option<&str>) {
        if let Some((_, limiter, gate)) = self.limiters.iter().find(|(a, _, _)| *a == api) {
            match share {
                Some(share) => gate.acquire(limiter, share).await,
                None => clock::ready(limiter).await,
            }
        }
    }
}

#[cfg(test)]
#[path = "admin_tests.rs"]
mod tests;
