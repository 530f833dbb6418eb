//! What a failed row comes to ([`on_failure`], by error class): its mark, the rest of its
//! room's queue deferred behind it, or publishing paused after a configuration error; and the
//! row's log line.

use rand::Rng;
use tokio::time::Instant;

use super::{Engine, Held};
use crate::delivery::action::{Failure, on_failure};
use crate::outbox::WORKER_NAME;
use crate::publish::BoxError;
use crate::store::{Mark, OutboxRow};
use crate::telemetry::names;

impl Engine {
    pub(super) fn failed(&mut self, held: Held, error: BoxError) {
        let jitter = rand::rng().random_range(0.5..=1.0);
        let options = &self.worker.options;
        let (mark, hold_room) = match on_failure(options, held.row.retry_count, error.as_ref(), jitter) {
            Failure::Mark(mark @ Mark::Park { .. }) => (mark, None),
            Failure::Mark(mark @ (Mark::Retry { after, .. } | Mark::Defer { after })) => (mark, Some(after)),
            Failure::Mark(Mark::Delivered) => (Mark::Delivered, None),
            Failure::ConfigPause { error } => {
                let pause = options.config_error_pause;
                if self.paused_until.is_none() {
                    metrics::gauge!(names::OUTBOX_PUBLISH_PAUSED, names::LABEL_REASON => "configuration")
                        .set(1.0);
                    tracing::error!(worker = WORKER_NAME, node_id = %self.worker.node_id, %error, pause = ?pause, "IM configuration error; outbox publishing paused");
                }
                self.paused_until = Some(Instant::now() + pause);
                self.defer_all(pause);
                (Mark::Defer { after: pause }, None)
            }
        };
        let (status, text) = match &mark {
            Mark::Park { error, .. } => ("failed", error.clone()),
            Mark::Retry { error, .. } => ("retryable", error.clone()),
            _ => ("pending", error.to_string()),
        };
        self.log_row(tracing::Level::WARN, &held.row, status, &text, "Outbox publish failed");
        let room = held.row.room_id.clone();
        self.marks.push((held, mark));
        if let Some(after) = hold_room
            && let Some(queue) = self.queues.remove(&room)
        {
            // The room's later rows wait behind the failed one.
            self.marks.extend(queue.into_iter().map(|h| (h, Mark::Defer { after })));
        }
    }

    pub(super) fn log_row(
        &self,
        level: tracing::Level,
        row: &OutboxRow,
        status: &str,
        error: &str,
        message: &str,
    ) {
        let retry_count =
            if status == "pending" { row.retry_count } else { row.retry_count.saturating_add(1) };
        macro_rules! emit {
            ($lvl:expr) => {
                tracing::event!($lvl, worker = WORKER_NAME, node_id = %self.worker.node_id, event_id = %row.event_id, event_type = %row.event_type, room_id = %row.room_id, retry_count, status, error = %error, "{message}")
            };
        }
        match level {
            tracing::Level::ERROR => emit!(tracing::Level::ERROR),
            tracing::Level::WARN => emit!(tracing::Level::WARN),
            _ => emit!(tracing::Level::DEBUG),
        }
    }
}
