//! A consumer's publish stack: the IM stack's own layers ([`PublishLayers`]), configured for the
//! consumer, around its [`Batcher`]. Only the rate limit differs in kind: Tencent's (per group,
//! per app, paths sharing a quota) means nothing to a webhook, so a consumer takes `tower`'s
//! plain one — events per second — whose `call` reaches the leaf at once, as the [`Batcher`]
//! needs.

use std::time::Duration;

use tower::Layer;
use tower::limit::RateLimitLayer;
use tower::util::BoxService;

use super::ConsumerStack;
use super::batch::{Batcher, Sink};
use crate::config::ConsumerSettings;
use crate::domain::EventType;
use crate::publish::filter::EventFilterLayer;
use crate::publish::stack::PublishLayers;

/// [`PublishLayers`] around `batcher`, as `settings` say.
pub fn layered<S: Sink>(settings: &ConsumerSettings, batcher: Batcher<S>) -> ConsumerStack {
    let layers = PublishLayers {
        skip: EventFilterLayer::skip(skipped(&settings.event_types)),
        rate_limit: settings
            .rate_limit_per_sec
            .map(|n| RateLimitLayer::new(n.into(), Duration::from_secs(1))),
        timeout: settings.timeout,
    };
    BoxService::new(layers.layer(batcher))
}

/// The event types a consumer asking for `wanted` skips (none when it asks for every type).
pub fn skipped(wanted: &[EventType]) -> Vec<&'static str> {
    if wanted.is_empty() {
        return Vec::new();
    }
    EventType::ALL.into_iter().filter(|t| !wanted.contains(t)).map(EventType::as_str).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_wish_list_skips_nothing_and_a_list_skips_the_rest() {
        assert!(skipped(&[]).is_empty());
        let skipped = skipped(&[EventType::RoomGiftSent, EventType::RoomClosed]);
        assert_eq!(skipped.len(), EventType::ALL.len() - 2);
        assert!(!skipped.contains(&"RoomGiftSent"));
        assert!(skipped.contains(&"RoomUserJoined"));
    }
}
