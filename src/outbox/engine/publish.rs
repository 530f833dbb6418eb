//! A pack of one room's claimed rows through the delivery core: its permit (the worker's
//! share first), then the message, the split of a content refusal, and one result per row.

use futures::future::BoxFuture;

use super::{Held, Outcome};
use crate::delivery::action::Action;
use crate::delivery::pack;
use crate::delivery::split::{self, Fate, Resend, SharedError};
use crate::outbox::OutboxWorker;
use crate::publish::{BoxError, Event, Message, Path};

impl OutboxWorker {
    /// Publishes a pack of one room's claimed rows through the delivery core (path `worker`):
    /// the events that reach IM in one message, built once its permit is in hand, each other
    /// one (answered by the event filter without a call) on its own. The stack bounds the IM
    /// call with its own timeout; waiting for a permit is not bounded here, the lease is
    /// renewed meanwhile. One result per row, in order.
    pub(super) async fn publish_pack(&self, rows: &[Held]) -> Vec<Result<(), Outcome>> {
        let mut results: Vec<Option<Result<(), Outcome>>> = Vec::with_capacity(rows.len());
        let mut packed: Vec<(usize, Event)> = Vec::new();
        for (i, held) in rows.iter().enumerate() {
            match &held.event {
                Err(error) => results.push(Some(Err(Outcome::Undecodable(error.clone())))),
                Ok(event) if pack::reaches_im(event) => {
                    results.push(None);
                    packed.push((i, event.clone()));
                }
                Ok(event) => results.push(Some(self.skip(&held.row.room_id, event.clone()).await)),
            }
        }
        if let Some(room) = rows.first().map(|h| h.row.room_id.as_str())
            && !packed.is_empty()
        {
            let (slots, events): (Vec<usize>, Vec<Event>) = packed.into_iter().unzip();
            let resend = WorkerResend { worker: self, room };
            let fates = match Action::of(resend.publish(events.clone()).await) {
                Action::Delivered => vec![Fate::Delivered; events.len()],
                Action::Split(error) => {
                    split::after_refusal(&resend, &self.quarantine, Path::Worker, events, error).await
                }
                Action::Failed(error) => vec![Fate::Failed(SharedError::new(error)); events.len()],
            };
            for (slot, fate) in slots.into_iter().zip(fates) {
                results[slot] = Some(match fate {
                    Fate::Delivered => Ok(()),
                    // Parked by its mark (a permanent refusal), like any other.
                    Fate::RefusedAlone(error) | Fate::Failed(error) => Err(Outcome::Failed(Box::new(error))),
                });
            }
        }
        results
            .into_iter()
            .map(|r| r.unwrap_or_else(|| Err(Outcome::Failed("not published".into()))))
            .collect()
    }

    /// Publishes an event the filter answers without a call: no permit.
    async fn skip(&self, room: &str, event: Event) -> Result<(), Outcome> {
        let message = Message::new(room.to_owned(), Path::Worker, vec![event]);
        self.outlet.call(message).await.map(|_| ()).map_err(Outcome::Failed)
    }
}

/// The worker's side of a message: its permit (the worker's share first), then the call; the
/// parts of a refused message go the same way, and an event refused alone is parked by its
/// mark (its room's later rows may go on meanwhile).
struct WorkerResend<'a> {
    worker: &'a OutboxWorker,
    room: &'a str,
}

impl WorkerResend<'_> {
    async fn publish(&self, events: Vec<Event>) -> Result<crate::publish::Outcome, BoxError> {
        self.worker.outlet.send_waiting(self.room, events).await
    }
}

impl Resend for WorkerResend<'_> {
    fn send(&self, events: Vec<Event>) -> BoxFuture<'_, Result<(), BoxError>> {
        Box::pin(async move { self.publish(events).await.map(|_| ()) })
    }

    fn refused_alone<'a>(&'a self, _: &'a Event, _: &'a SharedError) -> BoxFuture<'a, bool> {
        Box::pin(std::future::ready(true))
    }
}
