//! [`LogSink`]: the leaf of the publish stack when Tencent IM is disabled (local runs, demos).
//!
//! Events still flow through the very same layers (trace, metrics, filter, timeout); the sink
//! logs each event's identity at `info` and answers [`Outcome::Delivered`], so the outbox rows
//! are marked delivered exactly as with a real IM. The body is never logged.

use std::future::{Ready, ready};
use std::task::{Context, Poll};

use tower::Service;

use super::{BoxError, Message, Outcome};

/// A leaf service that logs each message and reports it delivered; always ready.
#[derive(Clone, Copy, Debug, Default)]
pub struct LogSink {
    _priv: (),
}

impl LogSink {
    /// Creates the sink.
    pub fn new() -> Self {
        Self::default()
    }
}

impl Service<Message> for LogSink {
    type Response = Outcome;
    type Error = BoxError;
    type Future = Ready<Result<Outcome, BoxError>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, message: Message) -> Self::Future {
        for event in &message.events {
            tracing::info!(
                event_id = %event.event_id,
                event_type = event.event_type,
                group = %message.group,
                path = message.path.as_str(),
                "Event published to log sink"
            );
        }
        ready(Ok(Outcome::Delivered))
    }
}

#[cfg(test)]
mod tests {
    use tower::ServiceExt;
    use tracing::Level;

    use super::*;
    use crate::publish::Path;
    use crate::publish::test_support::{Capture, message};

    #[tokio::test]
    async fn logs_identity_without_body_and_answers_delivered() {
        let capture = Capture::default();
        let _guard = capture.install();

        let outcome = LogSink::new()
            .oneshot(message("RoomUserJoined", Path::Worker))
            .await
            .expect("log sink never fails");
        assert_eq!(outcome, Outcome::Delivered);

        let events = capture.events();
        assert_eq!(events.len(), 1);
        let event = &events[0];
        assert_eq!(event.level, Level::INFO);
        let field = |name: &str| event.fields.get(name).map(String::as_str);
        assert_eq!(field("event_id"), Some("0190f5c2-7b1e-7cc0-8000-000000000001"));
        assert_eq!(field("event_type"), Some("RoomUserJoined"));
        assert_eq!(field("group"), Some("room-1"));
        assert_eq!(field("path"), Some("worker"));
        assert!(
            event.fields.values().all(|v| !v.contains("body-must-not-be-logged")),
            "the body leaked: {:?}",
            event.fields
        );
    }
}
