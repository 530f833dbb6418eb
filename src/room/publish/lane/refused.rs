//! A lane's message IM refused for its content (SPEC §13.1): the lane splits it itself, with
//! the delivery core's bisection, which the worker runs too ([`split::after_refusal`]), instead of handing the room to
//! the worker — whose hand-off and polling cost the room's other events seconds.
//!
//! Room order and the claim guard hold as for any lane send: the parts go out one after
//! another, in order, each through the shared stack (its rate limits included) and bounded by
//! `publish_timeout`, and only while the pack's first event is within its start-by time — so
//! every part ends inside the rows' claim guard, which no worker passes. A split that needs
//! longer (a slow IM) first guards the pack's rows again, fenced on their current guard
//! ([`Handoff::extend_guard`]). An event refused alone is parked at once, fenced on that guard
//! ([`Handoff::park`]), before anything after it is sent; when that fails, or a part fails
//! otherwise, the event and everything after it go to the worker, as today.
//!
//! [`Handoff::extend_guard`]: crate::room::publish::handoff::Handoff::extend_guard
//! [`Handoff::park`]: crate::room::publish::handoff::Handoff::park

use std::sync::Mutex;

use futures::future::BoxFuture;
use tokio::time::Instant;

use super::queue::lock;
use super::{LaneEvent, Lanes, Sent};
use crate::delivery::split::{self, Resend, SharedError};
use crate::publish::classify::reason;
use crate::publish::error::TooLate;
use crate::publish::{self, BoxError, Event, Path};
use crate::telemetry::names;

impl Lanes {
    /// Splits the message of `pack` (of `room`), which IM refused for its content with
    /// `error`: its commands are answered `pending` (their send no longer happens at once),
    /// then each event's fate.
    pub(super) async fn split(&self, pack: &[LaneEvent], room: &str, error: BoxError) -> Sent {
        for event in pack {
            event.settle(super::Delivery::Pending);
        }
        let events: Vec<Event> = pack.iter().map(|e| e.event.clone()).collect();
        let send_by = pack.first().map(|e| e.start_by);
        let Some(send_by) = send_by else { return Sent::Delivered };
        let ids = events.iter().map(|e| e.event_id.clone()).collect();
        let resend =
            LaneResend { lanes: self, room, ids, parked: Mutex::default(), send_by: Mutex::new(send_by) };
        Sent::Split(split::after_refusal(&resend, &self.quarantine, Path::Sync, events, error).await)
    }
}

/// The lane's side of a split.
struct LaneResend<'a> {
    lanes: &'a Lanes,
    room: &'a str,
    /// The pack's events, in order.
    ids: Vec<String>,
    /// Those of them parked so far.
    parked: Mutex<Vec<String>>,
    /// No part is sent after this: the pack's first event's start-by time, or the one its
    /// rows' guard was extended to.
    send_by: Mutex<Instant>,
}

impl LaneResend<'_> {
    /// True when a part may be sent now: within the send-by time, or once the rows of the
    /// pack not parked (those delivered by earlier parts are not marked yet) are guarded
    /// again.
    async fn in_time(&self) -> bool {
        if Instant::now() <= *lock(&self.send_by) {
            return true;
        }
        let unparked: Vec<String> = {
            let parked = lock(&self.parked);
            self.ids.iter().filter(|id| !parked.contains(id)).cloned().collect()
        };
        match self.lanes.handoff.extend_guard(&unparked, self.lanes.publish_timeout).await {
            Some(by) => {
                *lock(&self.send_by) = by;
                true
            }
            None => false,
        }
    }
}

impl Resend for LaneResend<'_> {
    fn send(&self, events: Vec<Event>) -> BoxFuture<'_, Result<(), BoxError>> {
        Box::pin(async move {
            if !self.in_time().await {
                // The rows' claim guard may end before this part does: the worker takes it.
                return Err(TooLate.into());
            }
            // Waits for its permit like any lane message, within `publish_timeout`.
            let deadline = Instant::now() + self.lanes.publish_timeout;
            self.lanes.outlet.send_by(self.room, events, deadline).await.map(|_| ())
        })
    }

    fn refused_alone<'a>(&'a self, event: &'a Event, error: &'a SharedError) -> BoxFuture<'a, bool> {
        Box::pin(async move {
            let class = publish::classify(error);
            let reason = reason(error);
            let text = format!("{}: {error}", class.as_str());
            let parked = self.lanes.handoff.park(&event.event_id, reason, &text).await;
            if parked {
                lock(&self.parked).push(event.event_id.clone());
                metrics::counter!(names::OUTBOX_PARKED_TOTAL, names::LABEL_EVENT_TYPE => event.event_type, names::LABEL_REASON => reason).increment(1);
                tracing::warn!(room_id = %self.room, event_id = %event.event_id, event_type = event.event_type, status = "failed", error = %text, "Room lane parked an event IM refused for its content");
            }
            parked
        })
    }
}
