//! How many events one message may carry (`im_batch.*`, SPEC §12.1), and the rule both
//! publishers (the room lanes and the outbox worker) use to pack a room's ready events: the
//! longest prefix, in order, within `max_events` and `max_bytes` of content.

/// Default `im_batch.max_events`.
pub const DEFAULT_MAX_EVENTS: usize = 32;

/// Default `im_batch.max_bytes`: content bytes of one message (Tencent allows 12 KB).
pub const DEFAULT_MAX_BYTES: usize = 11_000;

/// Tencent's own limit on a message's content, in bytes.
pub const TENCENT_MAX_CONTENT_BYTES: usize = 12 * 1024;

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

/// Bytes one event adds to a message's content: its body and its type name (what Tencent
/// counts against its 12 KB). The one measure both publishers pack by.
pub fn content_bytes(body: &str, event_type: &str) -> usize {
    body.len() + event_type.len()
}

impl PackLimits {
    /// One event a message (the behaviour before packing).
    pub const SINGLE: PackLimits = PackLimits { max_events: 1, max_bytes: DEFAULT_MAX_BYTES };

    /// How many of `sizes` (content bytes of the ready events, in order) go into the next
    /// message: at least one (an event too large on its own is the leaf's to refuse), then as
    /// many as fit both limits.
    pub fn take(&self, sizes: impl IntoIterator<Item = usize>) -> usize {
        let mut count = 0;
        let mut bytes = 0usize;
        for size in sizes {
            if count > 0 && (count >= self.max_events || bytes + size > self.max_bytes) {
                break;
            }
            count += 1;
            bytes += size;
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
    fn single_sends_one_event_a_message() {
        assert_eq!(PackLimits::SINGLE.take([1, 1, 1]), 1);
    }
}
