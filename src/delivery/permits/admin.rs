//! The admin APIs' limiters (SPEC §14.2): Tencent counts its 200 calls a second per API, so each
//! group admin API ([`AdminApi`]) has an app-wide limiter of its own, apart from the one
//! `send_group_msg` takes, at the same `im_rate_limit.global_per_sec`.
//!
//! They are this node's own limiters: admin calls are rare (a room's creation, close and
//! moderation), so they take no share of the cluster's quota in Redis, and N nodes may call one
//! API at up to N × the rate together; a rate-limited answer then pauses the room's group (or
//! the app) as any other does.

use super::clock::{self, DirectLimiter};
use super::limits::window_quota;
use crate::publish::AdminApi;

/// One limiter per admin API, in [`AdminApi::ALL`]'s order.
#[derive(Debug)]
pub(super) struct AdminLimits {
    limiters: Vec<(AdminApi, DirectLimiter)>,
}

impl AdminLimits {
    /// A limiter of `per_sec` calls in every sliding second for each API.
    pub(super) fn new(per_sec: u32) -> Self {
        let per_sec = per_sec.max(1);
        let burst = (per_sec / 20).max(1);
        let limiters =
            AdminApi::ALL.into_iter().map(|api| (api, clock::direct(window_quota(per_sec, burst)))).collect();
        Self { limiters }
    }

    /// Waits for a permit of `api`'s limiter, on tokio's timer.
    pub(super) async fn acquire(&self, api: AdminApi) {
        if let Some((_, limiter)) = self.limiters.iter().find(|(a, _)| *a == api) {
            clock::ready(limiter).await;
        }
    }
}

#[cfg(test)]
#[path = "admin_tests.rs"]
mod tests;
