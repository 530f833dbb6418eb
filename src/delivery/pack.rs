//! The packer: how many events one message may carry (`im_batch.*`, SPEC §12.1), and the one
//! loop both drivers (the room lanes and the outbox worker) take their next message off the
//! front of a room's queue with ([`next_pack`]): the longest prefix, in order, within
//! `max_events` and `max_bytes` of content, an event that goes alone (its sender, or a seated
//! user it names, is in [quarantine](super::quarantine)) in a message of its own — and the only place that decides
//! which queued events reach IM and which are skipped (the publish stack's filter answers
//! those without a call; they never count against the limits).

use super::codec;
use super::quarantine::Quarantine;
use crate::publish::{Event, Path};

/// Default `im_batch.max_events`.
pub const DEFAULT_MAX_EVENTS: usize = 32;

pub use crate::publish::{DEFAULT_MAX_BYTES, TENCENT_MAX_CONTENT_BYTES, content_bytes};

/// The size of one message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PackLimits {
    /// Most events in one message (1: one event a message).
    pub max_events: usize,
    /// Most content bytes in one message (the sum of every event's body and type name).
    pub max_bytes: usize,
}

impl Default for PackLimits {
    fn default() -> Self {
        Self { max_events: DEFAULT_MAX_EVENTS, max_bytes: DEFAULT_MAX_BYTES }
    }
}

/// What the packer reads of a queued event.
pub trait Ready {
    /// The event's type, as stored.
    fn event_type(&self) -> &str;
    /// Bytes it adds to a message's content ([`content_bytes`]).
    fn content_bytes(&self) -> usize;
    /// Whose content it carries ([`Event::sender`]).
    fn sender(&self) -> Option<&str>;
    /// The other users whose ids it carries from the mic seats ([`Event::seated`]).
    fn seated(&self) -> &[std::sync::Arc<str>] {
        &[]
    }
    /// True when it carries an IM group call ([`Event::admin`]): a message of its own.
    fn group_call(&self) -> bool {
        false
    }
}

impl Ready for Event {
    fn event_type(&self) -> &str {
        self.event_type
    }

    fn content_bytes(&self) -> usize {
        Event::content_bytes(self)
    }

    fn sender(&self) -> Option<&str> {
        self.sender.as_deref()
    }

    fn seated(&self) -> &[std::sync::Arc<str>] {
        &self.seated
    }

    fn group_call(&self) -> bool {
        self.admin.is_some()
    }
}

/// Whether `event` reaches IM: the packer's one answer ([`codec::reaches_im`], or a group call
/// its row carries, which reaches IM whatever its type).
pub fn reaches_im(event: &impl Ready) -> bool {
    event.group_call() || codec::reaches_im(event.event_type())
}

/// How many events off the front of `queue` (one room's, in order) make its next message on
/// `path`: the events that reach IM as far as `limits` let them in — at least one; a
/// quarantined sender's event alone, counted as such; an event carrying a group call alone,
/// and never behind another — and every event between them that is skipped. 0 for an empty
/// queue.
pub fn next_pack<'a, T: Ready + 'a>(
    limits: PackLimits,
    quarantine: &Quarantine,
    path: Path,
    queue: impl IntoIterator<Item = &'a T> + Clone,
) -> usize {
    let first_im = queue.clone().into_iter().enumerate().find(|(_, e)| reaches_im(*e));
    if let Some((at, event)) = first_im
        && event.group_call()
    {
        return at + 1;
    }
    let barrier = queue.clone().into_iter().position(|e| e.group_call()).unwrap_or(usize::MAX);
    let ready = queue
        .clone()
        .into_iter()
        .take(barrier)
        .filter(|e| reaches_im(*e))
        .map(|e| (e.content_bytes(), e.sender().into_iter().chain(e.seated().iter().map(|id| &**id))));
    let take = quarantine.take(limits, ready);
    if take.alone {
        Quarantine::sent_alone(path);
    }
    let mut im_left = take.events.max(1);
    let mut count = 0;
    for event in queue.into_iter().take(barrier) {
        let im = reaches_im(event);
        if im && im_left == 0 {
            break;
        }
        im_left -= usize::from(im);
        count += 1;
    }
    count
}

impl PackLimits {
    /// One event a message (the behaviour before packing).
    pub const SINGLE: PackLimits = PackLimits { max_events: 1, max_bytes: DEFAULT_MAX_BYTES };

    /// How many of `sizes` (content bytes of the ready events, in order) go into the next
    /// message: at least one (an event too large on its own is the leaf's to refuse), then as
    /// many as fit both limits.
    pub fn take(&self, sizes: impl IntoIterator<Item = usize>) -> usize {
        self.take_apart(sizes.into_iter().map(|size| (size, false)))
    }

    /// [`Self::take`] over `ready` (each event's content bytes, and whether it goes alone): an
    /// event that goes alone is the whole message at the front and ends the message before it
    /// anywhere else.
    pub fn take_apart(&self, ready: impl IntoIterator<Item = (usize, bool)>) -> usize {
        let mut count = 0;
        let mut bytes = 0usize;
        for (size, alone) in ready {
            if count > 0 && (alone || count >= self.max_events || bytes + size > self.max_bytes) {
                break;
            }
            count += 1;
            bytes += size;
            if alone {
                break;
            }
        }
        count
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn takes_the_longest_prefix_within_both_limits() {
        let limits = PackLimits { max_events: 3, max_bytes: 100 };
        assert_eq!(limits.take([10, 10, 10, 10]), 3, "max_events binds");
        assert_eq!(limits.take([60, 30, 20]), 2, "max_bytes binds");
        assert_eq!(limits.take([40, 60]), 2, "exactly max_bytes fits");
        assert_eq!(limits.take([]), 0);
    }

    #[test]
    fn an_oversized_event_goes_alone_and_ends_the_pack() {
        let limits = PackLimits { max_events: 3, max_bytes: 100 };
        assert_eq!(limits.take([500, 10]), 1, "alone, for the leaf to refuse");
        assert_eq!(limits.take([10, 500]), 1, "never packed behind another");
    }

    #[test]
    fn an_event_that_goes_alone_is_a_message_of_its_own() {
        let limits = PackLimits { max_events: 8, max_bytes: 100 };
        assert_eq!(limits.take_apart([(10, false), (10, true), (10, false)]), 1, "ends the pack before it");
        assert_eq!(limits.take_apart([(10, true), (10, false)]), 1, "alone at the front");
        assert_eq!(limits.take_apart([(10, false), (10, false), (10, true)]), 2);
        assert_eq!(limits.take_apart([(10, false), (10, false)]), 2);
    }

    #[test]
    fn single_sends_one_event_a_message() {
        assert_eq!(PackLimits::SINGLE.take([1, 1, 1]), 1);
    }
}
