//! The worker loop: the [engine](super::engine) fed continuously until cancelled.

use tokio::time::{Instant, MissedTickBehavior, interval, sleep_until};
use tokio_util::sync::CancellationToken;

use super::engine::{Engine, MARK_INTERVAL};

/// Shortest wait for the next row's claim-after time (a row claimable now but locked by
/// another worker's claim in progress must not spin this loop).
const MIN_WAIT: std::time::Duration = std::time::Duration::from_millis(10);
use super::{OutboxWorker, WORKER_NAME};
use crate::telemetry::names;

impl OutboxWorker {
    /// Runs until `cancel` fires. Claims a batch at once, then whenever the rows it holds fall
    /// to the low-water mark (so the next batch is claimed while the tail of the current one is
    /// still in flight): at once after a claim that left claimable rows it saw, otherwise on the
    /// next `poll_interval` tick, when woken ([`Self::waker`]) or when the next row's
    /// claim-after time comes. Results are marked at least every 250 ms; the leases
    /// of rows still held are renewed every quarter of a lease. While publishing is paused after
    /// a configuration error nothing is claimed.
    ///
    /// On cancel no new batch is claimed; the publishes in flight finish (each bounded by
    /// `publish_timeout`) and are marked; queued rows are released, claimable at once.
    pub async fn run_outbox_worker(&self, cancel: CancellationToken) {
        let options = &self.options;
        tracing::info!(
            worker = WORKER_NAME,
            node_id = %self.node_id,
            poll_interval = ?options.poll_interval,
            batch_size = options.batch_size,
            publish_timeout = ?options.publish_timeout,
            max_in_flight = options.max_in_flight,
            "Outbox worker started"
        );
        metrics::gauge!(names::OUTBOX_PUBLISH_PAUSED, names::LABEL_REASON => "configuration").set(0.0);
        let mut engine = Engine::new(self.clone());
        let mut poll = interval(options.poll_interval);
        poll.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut flush = interval(MARK_INTERVAL);
        flush.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut renew = interval(options.lease() / 4);
        renew.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let low_water = (options.batch_size / 2).max(options.max_in_flight);
        // Claim when due: at start, after a claim that left rows, on a tick or a wake, and when
        // the next row's claim-after time (its young-pending guard, its retry delay) comes.
        let mut due = true;
        let mut backlog = false;
        let mut next_row: Option<Instant> = None;
        loop {
            if cancel.is_cancelled() {
                break;
            }
            let paused = engine.paused();
            if paused.is_none() && (due || backlog) && engine.unfinished() <= low_water {
                due = false;
                match engine.claim().await {
                    Ok(claimed) => {
                        // Rows left that the claim saw: claim again as soon as the rows held
                        // allow (a claim that took nothing waits for its tick instead: what it
                        // left is capped or behind the rows held here).
                        backlog = claimed.rows > 0 && claimed.more;
                        next_row = if backlog { None } else { self.next_row().await };
                    }
                    Err(error) => {
                        backlog = false;
                        tracing::error!(worker = WORKER_NAME, node_id = %self.node_id, %error, "Outbox claim failed; retrying on the next tick");
                    }
                }
            }
            engine.start();
            let resume = paused.unwrap_or_else(Instant::now);
            tokio::select! {
                biased;
                () = cancel.cancelled() => break,
                () = engine.next_done() => {}
                _ = flush.tick() => {
                    engine.flush().await;
                }
                _ = renew.tick() => engine.renew().await,
                _ = poll.tick() => due = true,
                () = self.wake.notified() => due = true,
                () = sleep_until(resume), if paused.is_some() => due = true,
                () = sleep_until(next_row.unwrap_or_else(Instant::now)), if next_row.is_some() => {
                    next_row = None;
                    due = true;
                }
            }
        }
        engine.release_queued();
        // The publishes in flight finish (a publish waiting for rate-limit permits is given up
        // after one publish_timeout: its row stays delivering and comes back after its lease).
        let finish = async {
            while engine.publishing() {
                engine.next_done().await;
            }
        };
        if tokio::time::timeout(options.publish_timeout, finish).await.is_err() {
            engine.abort();
        }
        engine.flush().await;
        tracing::info!(worker = WORKER_NAME, node_id = %self.node_id, "Outbox worker stopped");
    }

    /// When the next row becomes claimable, if before the next poll tick would find it.
    async fn next_row(&self) -> Option<Instant> {
        match self.repo.next_claimable_in().await {
            Ok(Some(wait)) if wait < self.options.poll_interval => Some(Instant::now() + wait.max(MIN_WAIT)),
            Ok(_) => None,
            Err(error) => {
                tracing::warn!(worker = WORKER_NAME, node_id = %self.node_id, %error, "Could not read the next claim time");
                None
            }
        }
    }
}
