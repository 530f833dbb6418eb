//! The delivery core (SPEC §14.1): a room's IM operations leave in room order, packed, at most
//! `k` in flight, each once per attempt — written once here and driven twice, by a room's lane
//! on its owner (fed by commits, `crate::room`) and by the outbox worker (fed by claims,
//! [`crate::outbox`]).
//!
//! ```text
//! driver queue ─▶ Window (≤ k in flight; the lane: one at the permit step)
//!   ─▶ Outlet::permit (before the message exists)
//!   ─▶ pack::next_pack (the one packer: what reaches IM, what is skipped, how many per message)
//!   ─▶ Outlet::call (an admin call's own API permit, then the shared publish stack; a
//!      rate-limited answer pauses the group or app)
//!   ─▶ action::Action (delivered | split the halves and send them again | failed: the driver's
//!      policy — the lane hands the room to the worker, the worker marks retry, park or pause)
//! ```
//!
//! - [`codec`]: the envelope codec — a committed envelope or a stored row into an [`Event`].
//! - [`pack`]: the one packing rule and loop, over any queue of ready events.
//! - [`window`]: how many of a room's messages are in flight.
//! - [`permits`]: Tencent's limits, taken before a message is built.
//! - [`split`]: a message refused for its content, bisected by the same code on either path;
//!   [`quarantine`]: the senders whose events then go alone.
//! - [`action`]: what an outcome comes to.
//!
//! The publish stack ([`crate::publish`]) below is plain: it takes a message that is complete
//! when built and answers it.

pub mod action;
pub mod codec;
pub mod groups;
pub mod pack;
pub mod permits;
pub mod quarantine;
pub mod split;
pub mod window;

use std::time::Duration;

use tokio::time::Instant;
use tower::ServiceExt;

pub use self::permits::{Permits, SharedPermits};
pub use self::quarantine::Quarantine;
use crate::publish::classify::{classify, is_app_wide};
use crate::publish::error::TooLate;
use crate::publish::{BoxError, ErrorClass, Event, Message, Outcome, Path, Publisher};

/// How a driver's messages reach IM: a permit first, then one call of the shared stack.
#[derive(Clone, Debug)]
pub struct Outlet {
    /// The shared publish stack.
    pub publisher: Publisher,
    /// Where the permits come from.
    pub permits: SharedPermits,
}

impl Outlet {
    /// An outlet calling `publisher` with permits from `permits`.
    pub fn new(publisher: Publisher, permits: SharedPermits) -> Self {
        Self { publisher, permits }
    }

    /// A lane's permit for one message into `group`: now, or — `must_wait` called first — once
    /// it comes, by `until` at the latest ([`TooLate`] after).
    pub async fn permit_by(
        &self,
        group: &str,
        until: Instant,
        must_wait: impl FnOnce(),
    ) -> Result<(), TooLate> {
        if self.permits.now(group).await {
            return Ok(());
        }
        must_wait();
        tokio::time::timeout_at(until, self.permits.wait(group, false)).await.map_err(|_| TooLate)
    }

    /// The worker's send of `events` into `group`: waits for its permit (the worker's share
    /// first), then the call.
    pub async fn send_waiting(&self, group: &str, events: Vec<Event>) -> Result<Outcome, BoxError> {
        self.permits.wait(group, true).await;
        self.call(Message::new(group.to_owned(), Path::Worker, events)).await
    }

    /// Calls the stack with `message`, its permit in hand (or an event the filter answers
    /// without a call), once each admin call its events carry has its API's permit
    /// ([`Permits::admin`]); a rate-limited answer pauses its group, or the app.
    pub async fn call(&self, message: Message) -> Result<Outcome, BoxError> {
        for call in message.events.iter().filter_map(|e| e.admin.as_ref()) {
            self.permits.admin(call.api, call.share.as_deref()).await;
        }
        let group = message.group.clone();
        let result = self.publisher.clone().oneshot(message).await;
        if let Err(error) = &result
            && classify(error.as_ref()) == ErrorClass::RateLimited
        {
            self.permits.pause(&group, is_app_wide(error.as_ref()));
        }
        result
    }

    /// A lane's send of `events` into `group` that must end by `deadline` (a hair past it):
    /// its permit by then, then the call (the parts of a split message).
    pub async fn send_by(
        &self,
        group: &str,
        events: Vec<Event>,
        deadline: Instant,
    ) -> Result<Outcome, BoxError> {
        self.permit_by(group, deadline, || {}).await?;
        self.call_by(Message::new(group.to_owned(), Path::Sync, events), deadline).await
    }

    /// [`Self::call`], cut off a hair past `deadline`.
    pub async fn call_by(&self, message: Message, deadline: Instant) -> Result<Outcome, BoxError> {
        match tokio::time::timeout_at(deadline + CALL_MARGIN, self.call(message)).await {
            Ok(result) => result,
            Err(elapsed) => Err(elapsed.into()),
        }
    }
}

/// How much longer than the stack's own timeout a lane bounds a call: a call that took it all
/// is cut off (and counted) there.
pub const CALL_MARGIN: Duration = Duration::from_millis(10);
