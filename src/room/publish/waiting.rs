//! [`Waiting`]: a command's answer while its events are published, answered once each of its
//! events is settled (delivered, skipped, or `pending`).

use std::sync::{Arc, Mutex};

use tracing::Span;

use crate::room::command::decide::Reply;
use crate::room::command::outcome::{CommandResponse, Delivery, EventReceipt};

/// A command's answer while its events are published: answered once every event is settled
/// (or when dropped, with what is not settled yet `pending`).
pub(in crate::room) struct Waiting {
    state: Mutex<Option<WaitingState>>,
    /// The command's `lane` span when its trace is sampled: it ends when the lane lets go of
    /// the command's last event.
    _lane: Span,
}

struct WaitingState {
    response: CommandResponse,
    receipts: Vec<EventReceipt>,
    settled: Vec<bool>,
    reply: Reply,
}

impl Waiting {
    pub(in crate::room) fn new(
        response: CommandResponse,
        receipts: Vec<EventReceipt>,
        reply: Reply,
        lane: Span,
    ) -> Arc<Self> {
        let settled = vec![false; receipts.len()];
        let state = Mutex::new(Some(WaitingState { response, receipts, settled, reply }));
        Arc::new(Self { state, _lane: lane })
    }

    /// Settles the command's `index`-th event; the command is answered once all are. A
    /// second settlement of an event, or one after the answer, changes nothing.
    pub(in crate::room) fn settle(&self, index: usize, delivery: Delivery) {
        let mut slot = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let Some(state) = slot.as_mut() else { return };
        if let (Some(receipt), Some(settled)) = (state.receipts.get_mut(index), state.settled.get_mut(index))
            && !*settled
        {
            receipt.delivery = delivery;
            *settled = true;
        }
        if state.settled.iter().all(|s| *s)
            && let Some(state) = slot.take()
        {
            state.answer();
        }
    }
}

impl WaitingState {
    fn answer(self) {
        let WaitingState { mut response, receipts, reply, .. } = self;
        response.events = receipts;
        reply.send(Ok(response));
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        let slot = self.state.get_mut().unwrap_or_else(|e| e.into_inner());
        if let Some(state) = slot.take() {
            state.answer();
        }
    }
}
